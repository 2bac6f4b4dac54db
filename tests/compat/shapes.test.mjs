import { compatSuite } from './harness.mjs';
import { startCluster } from './cases_cluster.mjs';
import { cases } from './cases_shapes.mjs';

compatSuite(cases, {
  setup: (kind) => startCluster(kind, { others: true }),
});
