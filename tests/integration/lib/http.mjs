// http.mjs - a raw HTTP client for tests that need full control: any method, any headers
// (none added but Content-Length), chunked bodies, a chosen client address. Node built-ins only.
import http from 'node:http';

/** request(base, method, path, {body, headers, chunked, localAddress}) resolves
 * {status, headers, text, body}: body is the parsed JSON, null when empty, undefined when the
 * text is not JSON. body: string or Buffer; chunked sends it in 64 KiB chunks without a length. */
export function rawRequest(base, method, path, { body, headers = {}, chunked = false, localAddress } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(base + path);
    const h = { ...headers };
    if (body !== undefined && !chunked) h['content-length'] = Buffer.byteLength(body);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method,
      headers: h, agent: false, localAddress }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed = null;
        try { parsed = text ? JSON.parse(text) : null; } catch { parsed = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, text, body: parsed });
      });
    });
    req.on('error', reject);
    if (body !== undefined) {
      if (chunked) {
        const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
        for (let i = 0; i < b.length; i += 64 * 1024) req.write(b.subarray(i, i + 64 * 1024));
      } else req.write(body);
    }
    req.end();
  });
}
