// Report 000's Node experiment: N sequential GETs without a keep-alive agent (a new
// connection per request) and with one. Usage: node client.js URL [N]
const http = require("http");
const https = require("https");

const url = new URL(process.argv[2]);
const n = Number(process.argv[3] || 20);
const lib = url.protocol === "https:" ? https : http;
const ca = process.env.HANDSHAKE_CACERT ? require("fs").readFileSync(process.env.HANDSHAKE_CACERT) : undefined;

function get(agent) {
  return new Promise((resolve, reject) => {
    lib.get(url, { agent, ca }, (res) => {
      res.resume();
      res.on("end", resolve);
    }).on("error", reject);
  });
}

async function run(name, agent) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await get(agent);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log(`${name.padEnd(22)} ${n} requests in ${ms.toFixed(0)} ms (${(ms / n).toFixed(1)} ms/request)`);
  if (agent) agent.destroy();
}

(async () => {
  await run("agent: false", false);
  await run("keepAlive agent", new lib.Agent({ keepAlive: true, maxSockets: 1 }));
})();
