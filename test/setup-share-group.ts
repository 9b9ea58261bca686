import { readdirSync, rmSync } from "node:fs";
import { afterAll } from "vitest";

// Windows share a card with every process of the user on the host (src/ledger/card-log.ts): test
// files running side by side on the doubles' cards must not share with each other. Each file (and
// the children it starts, which inherit the environment) is a sharing group of its own, and its
// segments go when it ends.
const group = `vitest-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
process.env.GIUL_SHARE_GROUP = group;

afterAll(() => {
  const uid = process.getuid?.() ?? 0;
  let names: string[] = [];
  try {
    names = readdirSync("/dev/shm");
  } catch {
    return;
  }
  for (const name of names) {
    if (name.startsWith(`giul.${uid}.${group}.`)) rmSync(`/dev/shm/${name}`, { force: true });
  }
});
