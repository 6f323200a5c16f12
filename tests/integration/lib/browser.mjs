// browser.mjs - headless Debian Chromium for the page tests, through playwright-core.
// openBrowser() gives {page, problems, close}: `problems` collects page errors and console
// errors (a test asserts it stays empty); close() shuts the browser and removes its profile.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const CHROMIUM = '/usr/bin/chromium';

/** True when Debian's chromium is installed (make deps installs it). */
export function haveChromium() {
  return fs.existsSync(CHROMIUM);
}

/** Launch a private headless Chromium and open one page. */
export async function openBrowser({ width = 1440, height = 900 } = {}) {
  const { chromium } = await import('playwright-core');
  const udd = fs.mkdtempSync(path.join(os.tmpdir(), 'sr-chromium-'));
  let browser;
  try {
    browser = await chromium.launchPersistentContext(udd, {
      executablePath: CHROMIUM, headless: true, viewport: { width, height },
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const page = await browser.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
    const close = async () => {
      await browser.close();
      fs.rmSync(udd, { recursive: true, force: true });
    };
    return { page, problems, close };
  } catch (e) {
    if (browser) await browser.close().catch(() => {});
    fs.rmSync(udd, { recursive: true, force: true });
    throw e;
  }
}
