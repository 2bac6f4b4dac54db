// nats-server's documented cluster shape: each node's --routes lists the
// other nodes only, here by host name (nats-route://localhost:PORT). Both
// servers must form one JetStream cluster from it.
import { cases as all } from './cases_cluster.mjs';

const PICK = new Set([
  'a message published on one node reaches subscribers on the others',
  'an R3 stream created on one node takes publishes on another',
  'a pull consumer on an R3 stream delivers through another node',
]);

export const cases = all.filter((c) => PICK.has(c.name))
  .map((c) => ({ ...c, name: `routes to the others: ${c.name}` }));
