export { installCrds } from '../../src/dev/install-crds.ts';
