//! `compare` under the oracle: its own findings (the headline's, each row against the
//! best, the strategies left out) judged against the situation, and each row's run
//! judged as bench's is, against the situation with the row's strategy.

use super::*;

/// A row's strategy, as the situations spell it.
fn strategy(name: &str) -> Option<&'static str> {
    [
        "close",
        "close-resumed",
        "close-0rtt",
        "http10",
        "http10-keepalive",
        "keepalive",
        "h2",
        "h3-close",
        "h3-resumed",
        "h3-0rtt",
        "h3",
    ]
    .into_iter()
    .find(|s| *s == name)
}

/// The situation a row measured: the row's strategy (`close@no-cert`'s is close); a
/// proxied situation's "direct" row (the first strategy again without the proxy, to show what the proxy costs) takes
/// the direct path.
fn row_situation(s: &Situation, row: &str) -> Option<Situation> {
    let (name, direct) = match row.strip_suffix(" direct") {
        Some(n) => (n, true),
        None => (row, false),
    };
    // A row without the client certificate runs the strategy (a server that serves it).
    let name = name.strip_suffix("@no-cert").unwrap_or(name);
    Some(Situation {
        strategy: strategy(name)?,
        path: if direct { Path::Direct } else { s.path },
        ..*s
    })
}

/// The row a sentence starts with ("close direct saves …", "keepalive: not ranked …").
fn first_row(t: &str) -> &str {
    let end = t.find([':', ' ']).unwrap_or(t.len());
    if t[end..].starts_with(" direct") {
        &t[..end + " direct".len()]
    } else {
        &t[..end]
    }
}

/// The row named after `after` in a sentence, up to the next " (" or ".".
fn row_after<'a>(t: &'a str, after: &str) -> &'a str {
    let rest = t.split_once(after).map_or("", |(_, r)| r);
    let end = rest.find([' ', '.', ',']).unwrap_or(rest.len());
    if rest[end..].starts_with(" direct") {
        &rest[..end + " direct".len()]
    } else {
        &rest[..end]
    }
}

/// Whether a row (its situation) opens a new connection for every request: a strategy
/// that closes, or a persistent one whose peer ends each connection (tinyproxy ends
/// every client connection; squid keeps them whatever the origin does).
fn new_each(s: &Situation) -> bool {
    let persistent = matches!(s.strategy, "keepalive" | "http10-keepalive" | "h2" | "h3");
    !persistent
        || match s.path {
            Path::ProxyUp => true,
            Path::SquidUp => false,
            _ => s.ends_after_first(),
        }
}

/// Whether compare's row `row` goes through the situation's proxy (its "direct" rows
/// do not).
fn proxied(s: &Situation, row: &str) -> bool {
    matches!(s.path, Path::ProxyUp | Path::SquidUp | Path::ProxyDown) && !row.ends_with(" direct")
}

/// A sentence setting a proxied row against a direct one says the proxy's hop, and
/// only then.
fn says_the_hop(s: &Situation, a: &str, b: &str, t: &str) -> Result<(), String> {
    need(
        (proxied(s, a) != proxied(s, b)) == t.contains("through the proxy http://127.0.0.1:"),
        "one of the two rows goes through the proxy exactly when the sentence says so",
    )
}

fn row_of(s: &Situation, row: &str) -> Result<Situation, String> {
    row_situation(s, row).ok_or_else(|| format!("no row {row:?}"))
}

/// Where a sentence gives an interval ("1.44x [1.04-2.00]") and why it is no
/// difference, the reason holds of those figures.
fn reason_holds(t: &str) -> Result<(), String> {
    let Some((_, rest)) = t.split_once("x [") else {
        return Err("no interval given".into());
    };
    let (lo, rest) = rest.split_once('-').ok_or("an interval")?;
    let hi = rest.split_once(']').ok_or("an interval")?.0;
    let (lo, hi): (f64, f64) = (
        lo.parse().map_err(|_| "its low end")?,
        hi.parse().map_err(|_| "its high end")?,
    );
    if t.contains("the interval contains 1") {
        need(lo <= 1.0 && hi >= 1.0, "the interval does not contain 1")
    } else if t.contains("end, ") {
        need(
            // Printed to two places: 1.00 is a low end just above 1.
            (1.0..=1.06).contains(&lo) || (0.94..=1.0).contains(&hi),
            "the end said is not within the threshold",
        )
    } else {
        Ok(())
    }
}

/// compare's own codes, with what must hold for each; each row's run's codes are
/// bench's ([`PREDICATES`]), judged against the row's situation.
pub(super) const COMPARE_PREDICATES: &[Predicate] = &[
    Predicate {
        code: "cheapest_saves",
        holds: |s, t| {
            need(s.reached(), "nothing was reached")?;
            let (b, w) = (first_row(t), row_after(t, " against "));
            let (bs, ws) = (row_of(s, b)?, row_of(s, w)?);
            // Over the same hops a row that opens a connection per request is not the
            // cheaper; a direct one against one through the proxy may be (the proxy's
            // hop, which the sentence names).
            need(
                !new_each(&bs) || new_each(&ws) || proxied(s, b) != proxied(s, w),
                "the cheapest opens a new connection per request, the costliest does not, over the same hops",
            )?;
            if t.contains(&format!("{w} pays for every request")) {
                need(
                    new_each(&ws),
                    "the costliest does not open a connection per request",
                )?;
            }
            says_the_hop(s, b, w, t)
        },
    },
    Predicate {
        code: "costs_more",
        holds: |s, t| {
            need(s.reached(), "nothing was reached")?;
            let (r, b) = (first_row(t), row_after(t, " the time of "));
            let (rs, bs) = (row_of(s, r)?, row_of(s, b)?);
            if t.contains("opens a new connection for every request") {
                need(new_each(&rs), "the row keeps its connections")?;
            }
            if t.contains("opens no more connections than") {
                need(
                    !new_each(&rs) || new_each(&bs) || proxied(s, r) != proxied(s, b),
                    "the row opens a connection per request, the best does not, over the same hops",
                )?;
            }
            says_the_hop(s, r, b, t)
        },
    },
    Predicate {
        code: "no_measurable_difference",
        holds: |s, t| {
            need(s.reached(), "nothing was reached")?;
            reason_holds(t)
        },
    },
    Predicate {
        code: "row_failed",
        holds: |s, t| {
            let rs = row_of(s, first_row(t))?;
            need(!rs.reached(), "the row's server answered")?;
            failed_at_its_hop(&rs, t)
        },
    },
    Predicate {
        code: "feature_missing",
        holds: |s, t| {
            let rs = row_of(s, first_row(t))?;
            need(rs.reached(), "nothing was reached")?;
            if t.contains("no connection was reused") {
                need(
                    new_each(&rs) && rs.path != Path::RedirectUp,
                    "the peer keeps connections",
                )
            } else if t.contains("no request went in 0-RTT") {
                need(rs.tls != Tls::V13Early, "the server takes early data")
            } else {
                need(rs.tls == Tls::NoTickets, "the server resumes sessions")
            }
        },
    },
    Predicate {
        code: "strategy_left_out",
        holds: |s, t| {
            if s.tls == Tls::None {
                return need(
                    t.contains("an https:// URL") || t.contains("only with --h2c"),
                    "an http:// URL: its scheme is the reason",
                );
            }
            let names = t.split(':').next().unwrap_or("");
            let not_known =
                t.contains("not known whether the server offers them: the probes failed");
            if names.starts_with("h3") {
                // nginx answers no QUIC: true whatever its certificate.
                return need(
                    t.contains("no HTTP/3 answer on UDP") || (!s.tls.verifies() && not_known),
                    "nothing answers QUIC at the port",
                );
            }
            if !s.tls.verifies() {
                return need(
                    not_known,
                    "a probe that failed at TLS says nothing of the server",
                );
            }
            match names {
                "h2" => {
                    need(s.tls != Tls::H2, "the server offers h2")?;
                    need(t.contains("did not choose h2"), "nginx here has no http2")
                }
                "close-0rtt" => {
                    need(s.tls != Tls::V13Early, "the server takes early data")?;
                    need(
                        (s.tls == Tls::V12) == t.contains("negotiated TLS 1.2"),
                        "the version negotiated is the reason under TLS 1.2, and only then",
                    )
                }
                "close@no-cert" => super::mtls::no_cert_left_out(s, t),
                _ => Err(format!("a row left out: {names}")),
            }
        },
    },
    Predicate {
        code: "too_few_rounds",
        holds: never,
    },
    Predicate {
        code: "round_trips",
        holds: never,
    },
    Predicate {
        code: "key_exchange",
        holds: never,
    },
    Predicate {
        code: "client_certificate_cost",
        holds: super::mtls::compare_sentence,
    },
];

/// What must be so in a compare run, whatever its codes: its exit, no row ranked that
/// failed, answered only errors or missed its feature, and the keep-alive row marked
/// where its peer ends every connection.
fn required(s: &Situation, r: &Run) -> Vec<String> {
    let mut errs = Vec::new();
    let want_exit = if s.reached() && !s.error_status() {
        0
    } else {
        1
    };
    if r.code != Some(want_exit) {
        errs.push(format!("exit {:?}, not {want_exit}", r.code));
    }
    for row in r.json["comparison"]["rows"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = row["name"].as_str().unwrap_or("");
        let unfit = row["failed_rounds"].as_u64() != Some(0)
            || row["no_success"].as_bool() == Some(true)
            || !row["feature_missing"].is_null();
        if unfit && (row["best"] == true || row["significant"] == true) {
            errs.push(format!(
                "{name}: ranked though it failed or missed its feature"
            ));
        }
        let Some(rs) = row_situation(s, name) else {
            continue;
        };
        // After a redirect, the redirecting server's connections are reused.
        let must_miss = rs.reached()
            && !rs.error_status()
            && rs.strategy == "keepalive"
            && rs.path != Path::RedirectUp
            && new_each(&rs);
        if must_miss && row["feature_missing"].is_null() {
            errs.push(format!("{name}: reused nothing, and is not marked"));
        }
    }
    errs
}

/// The false claims of one compare run, against `table` (bench's predicates and
/// compare's own: [`both`]).
pub(super) fn judge(s: &Situation, r: &Run, table: &[Predicate]) -> Vec<String> {
    let mut errs = Vec::new();
    let mut check = |s: &Situation, f: &Value, row: &str| {
        errs.extend(check_finding(table, s, f, row));
    };
    for f in r.findings(Cmd::Compare) {
        check(s, f, "");
    }
    for row in r.json["scenarios"].as_array().into_iter().flatten() {
        let name = row["name"].as_str().unwrap_or("");
        let Some(rs) = row_situation(s, name) else {
            check(
                s,
                &serde_json::json!({"code": "(a row unknown here)", "text": name}),
                "",
            );
            continue;
        };
        let headline = row["headline"].is_object().then_some(&row["headline"]);
        for f in headline
            .into_iter()
            .chain(row["diagnosis"].as_array().into_iter().flatten())
        {
            check(&rs, f, &format!("row {name}: "));
        }
    }
    errs.extend(required(s, r));
    errs
}

/// bench's predicates (each row's run) and compare's own.
pub(super) fn both() -> Vec<Predicate> {
    PREDICATES
        .iter()
        .chain(COMPARE_PREDICATES)
        .copied()
        .collect()
}

/// Every code compare prints holds over the situations of a persistent strategy (compare
/// runs its own set of strategies, each a row): CI runs every third direct situation and
/// every other path; `HANDSHAKE_ORACLE=full` (`scripts/oracle`) runs them all and prints
/// the table.
#[test]
fn every_compare_claim_holds_over_generated_situations() {
    let _machine = crate::common::shared();
    let full = std::env::var("HANDSHAKE_ORACLE").is_ok_and(|v| v == "full");
    let persistent: Vec<Situation> = situations()
        .into_iter()
        .filter(Situation::persistent)
        .collect();
    let chosen = picked(if full {
        persistent
    } else {
        sample(&persistent, 3, 1)
    });
    let table = both();
    let mut rows = String::new();
    let mut wrong = Vec::new();
    for s in &chosen {
        let r = run(s, Cmd::Compare);
        let errs = judge(s, &r, &table);
        rows.push_str(&table_row(&s.name(), Cmd::Compare, &r, &errs));
        wrong.extend(errs.into_iter().map(|e| format!("{}: {e}", s.name())));
    }
    print_and_check(&rows, &wrong, chosen.len());
}

/// compare's oracle can fail: a true run (the scripted server's `Connection: close` on
/// every response: keepalive's row not ranked) is judged true, and false without the
/// predicate of `strategy_left_out` (TLS's strategies, on an http:// URL), or with one
/// that demands the wrong truth.
#[test]
fn the_compare_oracle_fails_on_a_missing_or_wrong_predicate() {
    let _machine = crate::common::shared();
    let s = CLOSING;
    let r = run(&s, Cmd::Compare);
    fails_without_or_wrong(
        &both(),
        "strategy_left_out",
        |_, t| need(!t.contains("https://"), "wrong on purpose"),
        |table| judge(&s, &r, table),
    );
    // A row named in a sentence is found as the situation's rows spell it.
    assert_eq!(first_row("close direct saves 0.4 ms"), "close direct");
    assert_eq!(
        row_after("x (2x the time of keepalive.", " the time of "),
        "keepalive"
    );
}
