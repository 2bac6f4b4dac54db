import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compatSuite } from './harness.mjs';
import { cases, DOMAIN } from './cases_domain.mjs';

// One config file for both servers: nats-server has no flag for it.
const conf = join(mkdtempSync(join(tmpdir(), 'keel-compat-domain-')),
  'domain.conf');
writeFileSync(conf, `jetstream { domain: ${DOMAIN} }\n`);
compatSuite(cases, { serverArgs: { nats: ['-c', conf], keel: ['-c', conf] } });
