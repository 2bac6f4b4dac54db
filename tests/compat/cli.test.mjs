import { compatSuite } from './harness.mjs';
import { cases } from './cases_cli.mjs';

compatSuite(cases);
