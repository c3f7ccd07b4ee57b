// Headless Chromium from the system (Debian's `chromium`, installed by the Makefile's
// DEBIAN_PACKAGES) driven by playwright-core: Playwright's own browser downloads are never used.
//   const browser = await launchBrowser();
import fs from 'node:fs';
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.PTN_CHROMIUM || '/usr/bin/chromium';

export async function launchBrowser() {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} not found: install Debian's chromium (make deps) or set PTN_CHROMIUM`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-background-networking', '--disable-component-update',
      '--disable-default-apps', '--disable-sync', '--no-first-run', '--disable-gpu'],
  });
}
