// A cleartext HTTP/2 server (prior knowledge) that counts what it serves, as ground
// truth that is not handshake's own (Node's http2 module, nghttp2).
//
// Usage: node tests/h2c_server.js STATS.json
// Binds 127.0.0.1 on a free port, prints "PORT <n>", answers every request with a
// 13-byte body, and rewrites STATS.json after every change: sessions (TCP connections)
// and streams (requests). Stops on SIGTERM.
'use strict';
const http2 = require('http2');
const fs = require('fs');

const statsPath = process.argv[2];
const counts = { sessions: 0, streams: 0 };
const save = () => {
  fs.writeFileSync(statsPath + '.tmp', JSON.stringify(counts));
  fs.renameSync(statsPath + '.tmp', statsPath);
};

const server = http2.createServer();
server.on('session', () => {
  counts.sessions += 1;
  save();
});
server.on('stream', (stream) => {
  counts.streams += 1;
  save();
  stream.respond({ ':status': 200, 'content-type': 'text/plain' });
  stream.end('hello, world\n');
});
save();
server.listen(0, '127.0.0.1', () => {
  console.log('PORT', server.address().port);
});
process.on('SIGTERM', () => {
  server.close();
  process.exit(0);
});
