// DeepL's Node SDK (deepl-node), unmodified, against `mtkit serve`: every public call of it that the server answers,
// each check's outcome (its values, or the class and message of what it threw) printed as one JSON object on stdout.
// tests/serve/test_deepl_node.py installs the SDK, starts the server, runs this and asserts each check apart.
//
// Environment: DEEPL_NODE_DIR (the folder npm installed deepl-node in), SERVER_URL, KEY, OTHER_KEY, QUOTA_KEY, WORK
// (a folder holding report.txt, page.html and memory.tmx; the translated files and the exported memory go there).

import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const deepl = createRequire(path.join(process.env.DEEPL_NODE_DIR, 'package.json'))('deepl-node');
const { SERVER_URL: serverUrl, KEY: key, OTHER_KEY: otherKey, QUOTA_KEY: quotaKey, WORK: work } = process.env;
// No retries: a wrong answer is to fail its check at once, not after the SDK's backoff.
const options = { serverUrl, maxRetries: 0 };
const client = new deepl.DeepLClient(key, options);
const translator = new deepl.Translator(key, options);
const other = new deepl.DeepLClient(otherKey, options);
const results = {};

const seconds = {}; // each check's time, which the test reports when the whole run is slow

async function check(name, body) {
  const started = Date.now();
  try {
    results[name] = await body();
  } catch (error) {
    results[name] = { error: className(error), message: String(error?.message ?? error) };
  }
  seconds[name] = (Date.now() - started) / 1000;
}

const className = (error) => error?.constructor?.name ?? String(error);

// What a call that should fail threw: a check's values, unlike a check that threw itself.
async function refusal(body) {
  try {
    await body();
    return { thrown: null };
  } catch (error) {
    return { thrown: className(error), said: String(error?.message ?? error) };
  }
}

const text = (result) => ({ text: result.text, detected: result.detectedSourceLang });
const dictionaries = (info) => info.dictionaries.map((d) => [d.sourceLangCode, d.targetLangCode, d.entryCount]);
const glossaryInfo = (info) => ({ id: info.glossaryId, name: info.name, dictionaries: dictionaries(info) });

// v2: text, languages, usage and the errors
await check('text_one', async () => text(await translator.translateText('A man is sleeping.', 'en', 'de')));
await check('text_list', async () =>
  (await translator.translateText(['A dog runs.', 'Two dogs play in the snow.'], 'en', 'de')).map(text),
);
await check('text_detected', async () => (await translator.translateText(['A dog runs.'], null, 'de')).map(text));
await check('text_html', async () =>
  text(await translator.translateText('<p>A dog <b>runs</b>.</p>', 'en', 'de', { tagHandling: 'html' })),
);
await check('languages', async () => ({
  source: (await translator.getSourceLanguages()).map((l) => l.code),
  target: (await translator.getTargetLanguages()).map((l) => [l.code, l.supportsFormality]),
}));
await check('glossary_pairs', async () =>
  (await translator.getGlossaryLanguagePairs()).map((p) => [p.sourceLang, p.targetLang]),
);
await check('error_wrong_key', () =>
  refusal(() => new deepl.Translator('not-a-key', options).translateText('A dog runs.', 'en', 'de')),
);
await check('error_unserved_target', () => refusal(() => translator.translateText('A dog runs.', 'en', 'fr')));
await check('quota', async () => {
  const limited = new deepl.Translator(quotaKey, options);
  const first = (await limited.translateText('A dog runs.', 'en', 'de')).text;
  const over = await refusal(() => limited.translateText('Two dogs play in the snow. A man sleeps.', 'en', 'de'));
  const usage = (await limited.getUsage()).character;
  return { first, over, count: usage.count, limit: usage.limit };
});

// v2 glossaries
await check('glossary_v2', async () => {
  const entries = new deepl.GlossaryEntries({ entries: { dog: 'Glossarhund' } });
  const made = await translator.createGlossary('pets', 'en', 'de', entries);
  const listed = (await translator.listGlossaries()).map((g) => g.glossaryId);
  const got = await translator.getGlossary(made.glossaryId);
  const read = (await translator.getGlossaryEntries(made)).entries();
  const used = (await translator.translateText('A dog runs.', 'en', 'de', { glossary: made })).text;
  const theirs = await refusal(() => other.getGlossary(made.glossaryId));
  await translator.deleteGlossary(made);
  const gone = await refusal(() => translator.getGlossary(made.glossaryId));
  return {
    listed: listed.includes(made.glossaryId),
    got: [got.name, got.sourceLang, got.targetLang, got.entryCount, got.ready],
    read,
    used,
    theirs,
    gone,
  };
});

// documents
for (const name of ['report.txt', 'page.html']) {
  await check(`document_${name}`, async () => {
    const out = path.join(work, `de-${name}`);
    const status = await translator.translateDocument(path.join(work, name), out, 'en', 'de');
    return { status: status.status, billed: status.billedCharacters, done: status.done() };
  });
}

// v3: multilingual glossaries
const dictionary = (entries) => ({
  sourceLangCode: 'en',
  targetLangCode: 'de',
  entries: new deepl.GlossaryEntries({ entries }),
});
let multilingual = null;
await check('v3_glossary_create', async () => {
  multilingual = await client.createMultilingualGlossary('pets', [dictionary({ dog: 'Hund', cat: 'Katze' })]);
  return glossaryInfo(multilingual);
});
await check('v3_glossary_list_get', async () => ({
  listed: (await client.listMultilingualGlossaries()).map(glossaryInfo),
  got: glossaryInfo(await client.getMultilingualGlossary(multilingual.glossaryId)),
  theirs: await refusal(() => other.getMultilingualGlossary(multilingual.glossaryId)),
}));
const entriesOf = async () =>
  (await client.getMultilingualGlossaryDictionaryEntries(multilingual, 'en', 'de')).entries.entries();
await check('v3_glossary_entries', entriesOf);
await check('v3_glossary_update_dictionary', async () => {
  const patched = dictionary({ dog: 'Glossarhund', snow: 'Glossarschnee' });
  const info = await client.updateMultilingualGlossaryDictionary(multilingual, patched);
  const used = await translator.translateText('A dog runs in the snow.', 'en', 'de', { glossary: multilingual });
  return { info: glossaryInfo(info), entries: await entriesOf(), used: used.text };
});
await check('v3_glossary_replace_dictionary', async () => {
  const info = await client.replaceMultilingualGlossaryDictionary(multilingual, dictionary({ snow: 'Schneeglossar' }));
  return { info: [info.sourceLangCode, info.targetLangCode, info.entryCount], entries: await entriesOf() };
});
await check('v3_glossary_rename', async () => {
  const info = await client.updateMultilingualGlossaryName(multilingual, 'animals');
  return { info: glossaryInfo(info), got: (await client.getMultilingualGlossary(multilingual.glossaryId)).name };
});
await check('v3_glossary_delete_dictionary', async () => {
  const second = await client.createMultilingualGlossary('second', [dictionary({ dog: 'Hund' })]);
  await client.deleteMultilingualGlossaryDictionary(second, 'en', 'de');
  return { gone: await refusal(() => client.getMultilingualGlossary(second.glossaryId)) };
});
await check('glossaries_from_csv', async () => {
  const v2 = await translator.createGlossaryWithCsv('csv', 'en', 'de', Buffer.from('dog,Hund\ncat,Katze\n'));
  const v3 = await client.createMultilingualGlossaryWithCsv('csv', 'en', 'de', 'dog,Hund\n');
  const updated = await client.updateMultilingualGlossaryDictionaryWithCsv(v3, 'en', 'de', 'cat,Katze\n');
  const replaced = await client.replaceMultilingualGlossaryDictionaryWithCsv(v3, 'en', 'de', 'snow,Schnee\n');
  const entries = (await client.getMultilingualGlossaryDictionaryEntries(v3, 'en', 'de')).entries.entries();
  await translator.deleteGlossary(v2);
  await client.deleteMultilingualGlossary(v3);
  return {
    v2: v2.entryCount,
    v2Gone: await refusal(() => translator.getGlossary(v2.glossaryId)),
    v3: dictionaries(v3),
    updated: dictionaries(updated),
    replaced: replaced.entryCount,
    entries,
  };
});
await check('v3_glossary_delete', async () => {
  await client.deleteMultilingualGlossary(multilingual);
  return {
    gone: await refusal(() => client.getMultilingualGlossary(multilingual.glossaryId)),
    listed: (await client.listMultilingualGlossaries()).map((g) => g.glossaryId),
  };
});

// v3: translation memories
let memoryId = null;
await check('memory_import', async () => {
  const job = await client.importTranslationMemoryFromFilepath(path.join(work, 'memory.tmx'), {
    displayName: 'pets',
    timeoutMs: 30000,
  });
  memoryId = job.results[0].translationMemoryId;
  const result = job.results[0];
  return { operation: job.operation, status: result.status, skipped: result.skippedSegmentCount };
});
const memoryInfo = (info) => ({
  id: info.translationMemoryId,
  name: info.name,
  source: info.sourceLanguage,
  targets: info.targetLanguages,
  segments: info.segmentCount,
  created: info.creationTime instanceof Date,
});
await check('memory_list_get', async () => ({
  listed: (await client.listTranslationMemories()).map(memoryInfo),
  got: memoryInfo(await client.getTranslationMemory(memoryId)),
  theirs: await refusal(() => other.getTranslationMemory(memoryId)),
}));
await check('memory_segments', async () => {
  const pages = [];
  let pageCursor;
  do {
    const page = await client.listTranslationMemorySegments(memoryId, { pageSize: 2, pageCursor });
    pages.push(page.segments.map((s) => [s.sourceText, s.targets[0].targetText, s.targets[0].targetLanguage]));
    pageCursor = page.nextPageCursor;
  } while (pageCursor);
  const filtered = await client.listTranslationMemorySegments(memoryId, { filterText: 'dog' });
  const cased = await client.listTranslationMemorySegments(memoryId, { filterText: 'DOG', filterCaseSensitive: true });
  return {
    pages,
    filtered: filtered.segments.map((s) => s.sourceText),
    cased: cased.segments.map((s) => s.sourceText),
    count: filtered.segmentCount,
  };
});
await check('memory_translate', async () => {
  const use = (sentence, threshold) => {
    const memory = { translationMemory: memoryId, translationMemoryThreshold: threshold };
    return translator.translateText(sentence, 'en', 'de', memory);
  };
  return {
    exact: (await use('A man is sleeping.', 100)).text,
    exactAt75: (await use('A man is sleeping.', 75)).text,
    fuzzy: (await use('a man is sleeping.', 75)).text,
    theirs: await refusal(() => other.translateText('A man is sleeping.', 'en', 'de', { translationMemory: memoryId })),
  };
});
await check('memory_export', async () => {
  const out = path.join(work, 'exported.tmx');
  const job = await client.exportTranslationMemoryToFilepath(memoryId, out);
  return { operation: job.operation, status: job.results[0].status, bytes: fs.statSync(out).size };
});
await check('memory_delete', async () => {
  await client.deleteTranslationMemory(memoryId);
  return {
    gone: await refusal(() => client.getTranslationMemory(memoryId)),
    listed: (await client.listTranslationMemories()).map((m) => m.translationMemoryId),
  };
});

process.stdout.write(JSON.stringify({ results, seconds }));
