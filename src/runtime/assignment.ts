import { createHash } from 'node:crypto';

/** A key's rendezvous weight on a member: the first 48 bits of SHA-256(member NUL key). */
function weight(member: string, key: string): number {
  return createHash('sha256').update(member).update('\0').update(key).digest().readUIntBE(0, 6);
}

/**
 * Which member takes each key: rendezvous (highest random weight) hashing with bounded loads.
 * Every member gets floor(K/M) or ceil(K/M) of the K keys (exactly balanced), each key going to
 * the member it ranks highest among those with room left, keys placed in sorted order. Pure and
 * deterministic, so replicas that see the same keys and members agree without talking; a member
 * joining or leaving moves few keys besides its own share (the bound can move a handful more).
 * No members: no key is assigned.
 */
export function assignKeys(keys: readonly string[], members: readonly string[]): Map<string, string> {
  const assignment = new Map<string, string>();
  const uniqueMembers = [...new Set(members)].sort();
  if (uniqueMembers.length === 0) return assignment;
  const sortedKeys = [...new Set(keys)].sort();
  const floor = Math.floor(sortedKeys.length / uniqueMembers.length);
  // How many members may take one key more than `floor`.
  let larger = sortedKeys.length % uniqueMembers.length;
  const load = new Map(uniqueMembers.map((member) => [member, 0]));
  for (const key of sortedKeys) {
    const ranked = uniqueMembers
      .map((member) => ({ member, weight: weight(member, key) }))
      .sort((a, b) => b.weight - a.weight || (a.member < b.member ? -1 : 1));
    const roomy = ranked.find(({ member }) => {
      const taken = load.get(member) ?? 0;
      return taken < floor || (taken === floor && larger > 0);
    });
    // Total room is exactly the number of keys, so some member always has room.
    const chosen = roomy?.member ?? uniqueMembers[0] ?? '';
    const taken = load.get(chosen) ?? 0;
    if (taken === floor) larger -= 1;
    load.set(chosen, taken + 1);
    assignment.set(key, chosen);
  }
  return assignment;
}
