import { compatSuite } from './harness.mjs';
import { cases, startCluster } from './cases_cluster.mjs';

compatSuite(cases, { setup: startCluster });
