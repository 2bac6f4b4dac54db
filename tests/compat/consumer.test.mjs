import { compatSuite } from './harness.mjs';
import { cases } from './cases_consumer.mjs';

compatSuite(cases);
