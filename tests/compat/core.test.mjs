import { compatSuite } from './harness.mjs';
import { cases } from './cases_core.mjs';

compatSuite(cases);
