// A TLS server that is not handshake's own (Go's crypto/tls, net/http) and counts what
// it sees of each connection's handshake, the ground truth for tests/bench/tls_groups.rs:
//
//   - the key-exchange group of each connection (ConnectionState().CurveID, Go 1.25+),
//   - the ClientHellos read off the connection's first bytes (two on a connection
//     means the server sent a HelloRetryRequest) and the first one's size in bytes
//     (its TLS record, header included),
//   - the bytes it wrote before the client's Finished arrived (its first flight),
//   - with -client-ca FILE (RequireAndVerifyClientCert): the client certificates
//     presented in full handshakes, by subject, and the handshakes that failed (Go's
//     "TLS handshake error" log lines: a client without a certificate, or another CA's).
//
// Usage: tls_groups_server -curves X25519MLKEM768,X25519 -cert FILE [-no-tickets] [-client-ca FILE] [-addr A:P]
// It writes its self-signed certificate (for 127.0.0.1) to FILE, prints
// "TLS_PORT STATS_PORT" on stdout, answers every request with "ok" on TLS_PORT, and
// the counts as JSON at GET / on STATS_PORT (plain HTTP, so reading them is not counted).
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// tap reads the client's TLS records as they pass until the first that is neither a
// ClientHello nor a ChangeCipherSpec (20): TLS 1.3's encrypted Finished, TLS 1.2's
// ClientKeyExchange. Until then it also counts the bytes the server writes.
type tap struct {
	net.Conn
	mu      sync.Mutex
	buf     []byte
	done    bool
	hellos  []int
	written int
	counted bool
}

func (c *tap) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done && n > 0 {
		c.buf = append(c.buf, p[:n]...)
		for len(c.buf) >= 5 {
			typ := c.buf[0]
			l := int(c.buf[3])<<8 | int(c.buf[4])
			if len(c.buf) < 5+l {
				break
			}
			// A ClientHello fills its record (its own length is the record's less 4);
			// any other handshake record (TLS 1.2's ClientKeyExchange, an encrypted
			// Finished whose first byte may be 1) ends the client's hellos.
			hello := typ == 22 && l >= 4 && c.buf[5] == 1 &&
				int(c.buf[6])<<16|int(c.buf[7])<<8|int(c.buf[8]) == l-4
			if hello {
				c.hellos = append(c.hellos, 5+l)
			} else if typ == 22 || typ != 20 {
				c.done = true
				c.buf = nil
				break
			}
			c.buf = c.buf[5+l:]
		}
	}
	return n, err
}

func (c *tap) Write(p []byte) (int, error) {
	c.mu.Lock()
	if !c.done {
		c.written += len(p)
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tap{Conn: c}, nil
}

type counts struct {
	mu               sync.Mutex
	Connections      int            `json:"connections"`
	Groups           map[string]int `json:"groups"`
	ClientHellos     int            `json:"client_hellos"`
	HelloRetries     int            `json:"hello_retries"`
	ClientHelloBytes []int          `json:"client_hello_bytes"`
	FlightBytes      []int          `json:"flight_bytes"`
	Resumed          int            `json:"resumed"`
	Requests         int            `json:"requests"`
	// With -client-ca: full handshakes with a client certificate, by its subject, and
	// the handshakes that failed.
	ClientCertificates int            `json:"client_certificates"`
	ClientSubjects     map[string]int `json:"client_subjects"`
	HandshakeErrors    int            `json:"handshake_errors"`
}

// errors counts the server's "TLS handshake error" log lines.
type errors struct{ c *counts }

func (e errors) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "TLS handshake error") {
		e.c.mu.Lock()
		e.c.HandshakeErrors++
		e.c.mu.Unlock()
	}
	return len(p), nil
}

type key struct{}

func main() {
	curves := flag.String("curves", "", "CurvePreferences, comma-separated (Go's names); empty: Go's default")
	certFile := flag.String("cert", "", "where to write the certificate (PEM)")
	noTickets := flag.Bool("no-tickets", false, "no session tickets")
	addr := flag.String("addr", "127.0.0.1:0", "where to listen (its host is in the certificate)")
	clientCA := flag.String("client-ca", "", "require a client certificate signed by a CA in this PEM file")
	flag.Parse()

	names := map[string]tls.CurveID{
		"X25519MLKEM768": tls.X25519MLKEM768,
		"X25519":         tls.X25519,
		"P256":           tls.CurveP256,
		"P384":           tls.CurveP384,
		"P521":           tls.CurveP521,
	}
	var prefs []tls.CurveID
	for _, n := range strings.Split(*curves, ",") {
		if n == "" {
			continue
		}
		id, ok := names[n]
		if !ok {
			fmt.Fprintln(os.Stderr, "unknown curve", n)
			os.Exit(2)
		}
		prefs = append(prefs, id)
	}

	ips := []net.IP{net.ParseIP("127.0.0.1")}
	if host, _, err := net.SplitHostPort(*addr); err == nil && host != "127.0.0.1" {
		ips = append(ips, net.ParseIP(host))
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           ips,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &priv.PublicKey, priv)
	if err != nil {
		panic(err)
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(*certFile, pemBytes, 0o644); err != nil {
		panic(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}

	c := &counts{Groups: map[string]int{}, ClientSubjects: map[string]int{}}
	config := &tls.Config{
		Certificates:           []tls.Certificate{cert},
		CurvePreferences:       prefs,
		MinVersion:             tls.VersionTLS12,
		SessionTicketsDisabled: *noTickets,
		NextProtos:             []string{"http/1.1"},
	}
	if *clientCA != "" {
		pool := x509.NewCertPool()
		pemCA, err := os.ReadFile(*clientCA)
		if err != nil || !pool.AppendCertsFromPEM(pemCA) {
			fmt.Fprintln(os.Stderr, "no CA in", *clientCA)
			os.Exit(2)
		}
		config.ClientCAs = pool
		config.ClientAuth = tls.RequireAndVerifyClientCert
	}
	srv := &http.Server{
		TLSConfig: config,
		ErrorLog:  log.New(errors{c}, "", 0),
		ConnContext: func(ctx context.Context, conn net.Conn) context.Context {
			if t, ok := conn.(*tls.Conn); ok {
				return context.WithValue(ctx, key{}, t.NetConn().(*tap))
			}
			return ctx
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := r.Context().Value(key{}).(*tap)
			c.mu.Lock()
			c.Requests++
			t.mu.Lock()
			if !t.counted {
				t.counted = true
				c.Connections++
				c.Groups[r.TLS.CurveID.String()]++
				c.ClientHellos += len(t.hellos)
				if len(t.hellos) > 1 {
					c.HelloRetries++
				}
				if len(t.hellos) > 0 {
					c.ClientHelloBytes = append(c.ClientHelloBytes, t.hellos[0])
				}
				c.FlightBytes = append(c.FlightBytes, t.written)
				if r.TLS.DidResume {
					c.Resumed++
				} else if len(r.TLS.PeerCertificates) > 0 {
					c.ClientCertificates++
					c.ClientSubjects[r.TLS.PeerCertificates[0].Subject.String()]++
				}
			}
			t.mu.Unlock()
			c.mu.Unlock()
			w.Write([]byte("ok"))
		}),
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		panic(err)
	}
	stats, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go http.Serve(stats, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		json.NewEncoder(w).Encode(c)
	}))
	fmt.Printf("%d %d\n", ln.Addr().(*net.TCPAddr).Port, stats.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	panic(srv.ServeTLS(listener{ln}, "", ""))
}
