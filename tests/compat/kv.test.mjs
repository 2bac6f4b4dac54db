import { compatSuite } from './harness.mjs';
import { cases } from './cases_kv.mjs';

compatSuite(cases);
