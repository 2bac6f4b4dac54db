import { compatSuite } from './harness.mjs';
import { cases } from './cases_stream.mjs';

compatSuite(cases);
