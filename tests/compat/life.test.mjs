import { compatSuite } from './harness.mjs';
import { cases } from './cases_life.mjs';

compatSuite(cases, { shared: false });
