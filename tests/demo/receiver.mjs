// receiver.mjs - the demo's webhook receiver: verifies every delivery with the official
// Standard Webhooks library and prints one line per event. Usage: node receiver.mjs PORT SECRET
import http from 'node:http';
import { Webhook } from 'standardwebhooks';

const [port, secret] = process.argv.slice(2);
const wh = new Webhook(secret);
http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    try {
      const ev = wh.verify(body, req.headers);
      const d = ev.data ?? {};
      const sr = ev.statusrelay ?? {};
      console.log(`webhook ok   ${req.headers['webhook-id']} ${String(d.requestId).slice(0, 12)}… ` +
        `${sr.previousStatus ?? '∅'} -> ${d.status} (seq ${sr.seq}, via ${sr.source})` +
        `${(sr.flags ?? []).includes('reversal') ? '  REVERSAL: the upstream took back ' + sr.previousStatus : ''}` +
        `${sr.reorg ? '  reorg details attached' : ''}`);
      res.writeHead(204).end();
    } catch (e) {
      console.log(`webhook BAD  ${req.headers['webhook-id']}: ${e.message}`);
      res.writeHead(400).end();
    }
  });
}).listen(Number(port), '127.0.0.1', () => console.log(`receiver listening on 127.0.0.1:${port}`));
