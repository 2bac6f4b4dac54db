// The single-seed cluster shape: every node's --routes names node 1 only
// (node 1 itself included). Both servers must form one cluster from it.
import { cases as all } from './cases_cluster.mjs';

const PICK = new Set([
  'a message published on one node reaches subscribers on the others',
  'an R3 stream created on one node takes publishes on another',
]);

export const cases = all.filter((c) => PICK.has(c.name))
  .map((c) => ({ ...c, name: `single seed: ${c.name}` }));
