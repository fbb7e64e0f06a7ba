/** The syncer's JSON helpers are the runtime's (one merge patch, one equality for everything). */
export {
  applyMergePatch,
  cloneJson,
  deepEqual as jsonEqual,
  emptyRecord,
  isJsonObject,
  type Json,
  type JsonObject,
  mergePatchDiff,
  ownValue,
  setOwnValue,
} from '../../runtime/json.ts';
