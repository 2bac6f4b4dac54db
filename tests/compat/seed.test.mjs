import { compatSuite } from './harness.mjs';
import { startCluster } from './cases_cluster.mjs';
import { cases } from './cases_seed.mjs';

compatSuite(cases, {
  setup: (kind) => startCluster(kind, { seed: true }),
});
