// docs/compat.md states the case count and every listed difference; this
// fails when they drift from the cases (regenerate: node tests/compat/doc.mjs
// --write).
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { allCases, DOC, generatedPart, render } from './doc.mjs';

test('docs/compat.md lists the cases and differences the suite has', async () => {
  const part = generatedPart(readFileSync(DOC, 'utf8'));
  assert.notEqual(part, null, 'docs/compat.md has no generated part');
  assert.equal(part, await render(),
    'docs/compat.md is stale: run node tests/compat/doc.mjs --write');
});

test('the suite has at least 60 cases with unique names', async () => {
  const cases = await allCases();
  assert.ok(cases.length >= 60, `only ${cases.length} cases`);
  assert.equal(new Set(cases.map((c) => c.name)).size, cases.length);
});

test('every listed difference gives a reason', async () => {
  for (const c of await allCases()) {
    for (const why of Object.values({ ...c.intended, ...c.known })) {
      assert.ok(typeof why === 'string' && why.length > 10, c.name);
    }
  }
});
