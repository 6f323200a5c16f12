// resp.mjs - a tiny Redis client (one command per connection, RESP2) for the tests and the
// benchmark driver. Node built-ins only.
import net from 'node:net';

/** Send one Redis command to 127.0.0.1:port and resolve with the parsed reply (an error
 * reply resolves as an Error object); rejects on a connection error or after 10 s. */
export function redisCmd(port, ...args) {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const t = setTimeout(() => { c.destroy(); reject(new Error('redis timeout')); }, 10000);
    c.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      try {
        const [v] = parseResp(buf, 0);
        clearTimeout(t);
        c.destroy();
        resolve(v);
      } catch (e) {
        if (e !== INCOMPLETE) { clearTimeout(t); c.destroy(); reject(e); }
      }
    });
    c.on('error', (e) => { clearTimeout(t); reject(e); });
    let out = `*${args.length}\r\n`;
    for (const a of args) { const s = String(a); out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`; }
    c.write(out);
  });
}

const INCOMPLETE = new Error('incomplete');

/** Parse one RESP value at b[i]: [value, next index]; throws INCOMPLETE when b is short. */
function parseResp(b, i) {
  if (i >= b.length) throw INCOMPLETE;
  const end = b.indexOf('\r\n', i);
  if (end < 0) throw INCOMPLETE;
  const line = b.toString('utf8', i + 1, end);
  switch (String.fromCharCode(b[i])) {
    case '+': return [line, end + 2];
    case '-': return [new Error(line), end + 2];
    case ':': return [Number(line), end + 2];
    case '$': {
      const n = Number(line);
      if (n < 0) return [null, end + 2];
      if (b.length < end + 2 + n + 2) throw INCOMPLETE;
      return [b.toString('utf8', end + 2, end + 2 + n), end + 2 + n + 2];
    }
    case '*': {
      const n = Number(line);
      if (n < 0) return [null, end + 2];
      const arr = []; let j = end + 2;
      for (let k = 0; k < n; k++) { const [v, nj] = parseResp(b, j); arr.push(v); j = nj; }
      return [arr, j];
    }
    default: throw new Error('bad RESP');
  }
}

/** MONITOR on its own connection to the Redis at port: lines() gives what it has seen so
 * far (one command per line), stop() ends it; onCleanup(fn) (optional) is told how to end it
 * when a test fails first. */
export async function monitor(port, onCleanup) {
  const { until } = await import('./proc.mjs');
  const s = net.connect(port, '127.0.0.1');
  let buf = '';
  s.on('data', (b) => { buf += b.toString('latin1'); });
  s.write('MONITOR\r\n');
  await until(() => buf.startsWith('+OK'), { msg: 'MONITOR on' });
  onCleanup?.(() => s.destroy());
  return { lines: () => buf.split('\r\n').slice(1), stop: () => s.destroy() };
}
