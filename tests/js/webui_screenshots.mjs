// Writes docs/webui.png: the chat page of `ptn serve` with the bundled stories260K, a reply
// streamed for real (its speed line is that run's own timings) after an earlier turn stored in
// the browser that shows how reasoning (folded, here opened) and a tool call look; stories260K
// itself writes neither.
//   node tests/js/webui_screenshots.mjs build/ptn .
import path from 'node:path';
import { launchBrowser } from './browser_util.mjs';
import { parseArgs, startServer } from './serve_util.mjs';

const { ptn, root } = parseArgs('webui_screenshots.mjs');
const server = await startServer(ptn, root, { template: 'Qwen-Qwen2.5-7B-Instruct' });
const browser = await launchBrowser();
try {
  const page = await (await browser.newContext({ viewport: { width: 1100, height: 720 }, colorScheme: 'light' })).newPage();
  await page.goto(server.url + '/');
  await page.evaluate(() => {
    localStorage.setItem('ptn.conversations', JSON.stringify([{ id: 'shot', title: 'A story about a dog', messages: [
      { role: 'user', content: 'What is the weather where the dog lives?' },
      { role: 'assistant', content: 'Let me look that up.',
        reasoning: 'The user asks about the weather. I should call the weather tool for the dog\'s town.',
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Lyon"}' } }] },
    ] }]));
    localStorage.setItem('ptn.current', JSON.stringify('shot'));
    localStorage.setItem('ptn.settings', JSON.stringify({ temperature: 0, max_tokens: 80, system: '', extra: '' }));
  });
  await page.reload();
  await page.fill('#input', 'Tell me a story about a dog');
  await page.click('#send');
  await page.waitForSelector('#messages .msg.assistant:last-of-type[data-state="done"]', { timeout: 30000 });
  await page.locator('details.reasoning').first().evaluate((d) => { d.open = true; });
  await page.waitForTimeout(2500);  // one more /metrics poll
  const out = path.join(root, 'docs/webui.png');
  await page.screenshot({ path: out });
  console.log(`wrote ${out}`);
} finally {
  await browser.close();
  await server.stop();
}
