import { getEventListeners } from 'node:events';
import type { KubernetesObject } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { applyObject } from '../../src/runtime/apply.ts';
import { systemClock } from '../../src/runtime/clock.ts';
import { isApiError, isNotFound, ObjectBeingDeletedError } from '../../src/runtime/errors.ts';
import { EventRecorder, eventResource } from '../../src/runtime/events.ts';
import { addFinalizer, removeFinalizer } from '../../src/runtime/finalizers.ts';
import {
  collectionPath,
  KubeClient,
  type ObjectList,
  objectPath,
  type ResourceRef,
} from '../../src/runtime/kube-client.ts';
import { hostKubeConfig, useNamespace } from '../support/cluster.ts';

const configMaps: ResourceRef = { group: '', version: 'v1', plural: 'configmaps', namespaced: true };
type ConfigMap = KubernetesObject & { data?: Record<string, string> };

describe('runtime helpers against a real apiserver', () => {
  const namespace = useNamespace('helpers');
  const api = new KubeClient(hostKubeConfig());
  const get = (name: string) =>
    api.request<ConfigMap>({ method: 'GET', path: objectPath(configMaps, namespace(), name) });
  const create = (name: string, finalizers?: string[]) =>
    api.request<ConfigMap>({
      method: 'POST',
      path: collectionPath(configMaps, namespace()),
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, finalizers } },
    });

  it('leaves no abort listener on a long-lived signal after its requests finish', async () => {
    const controller = new AbortController();
    await Promise.all(
      Array.from({ length: 20 }, () =>
        api.request({
          method: 'GET',
          path: collectionPath(configMaps, namespace()),
          signal: controller.signal,
        }),
      ),
    );
    await api
      .request({
        method: 'GET',
        path: objectPath(configMaps, namespace(), 'missing'),
        signal: controller.signal,
      })
      .catch(() => {});
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('finalizers: added once, refused on a stale read, never added while deleting, removal lets deletion finish', async () => {
    const fin = 'platform.io/cleanup';
    const created = await create('fin');
    const withFinalizer = await addFinalizer(api, configMaps, created, fin);
    expect(withFinalizer.metadata?.finalizers).toEqual([fin]);
    expect(await addFinalizer(api, configMaps, withFinalizer, fin)).toBe(withFinalizer);

    // A stale copy (older resourceVersion) must not overwrite the newer object.
    const stale = await addFinalizer(api, configMaps, created, 'platform.io/other').catch(
      (err: unknown) => err,
    );
    expect(isApiError(stale)).toBe(true);
    expect((await get('fin')).metadata?.finalizers).toEqual([fin]);

    await api.request({ method: 'DELETE', path: objectPath(configMaps, namespace(), 'fin') });
    const deleting = await get('fin');
    expect(deleting.metadata?.deletionTimestamp).toBeTruthy();
    await expect(addFinalizer(api, configMaps, deleting, 'platform.io/other')).rejects.toBeInstanceOf(
      ObjectBeingDeletedError,
    );

    await removeFinalizer(api, configMaps, deleting, fin);
    const gone = await get('fin').catch((err: unknown) => err);
    expect(isNotFound(gone)).toBe(true);
  });

  it('finalizers: removal of one keeps the others', async () => {
    const created = await create('two', ['a.io/x', 'b.io/y']);
    const after = await removeFinalizer(api, configMaps, created, 'a.io/x');
    expect(after.metadata?.finalizers).toEqual(['b.io/y']);
    await removeFinalizer(api, configMaps, after, 'b.io/y');
  });

  it('server-side apply: creates, prunes fields the manager dropped, conflicts unless forced', async () => {
    const intent = (data: Record<string, string>): ConfigMap => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'applied', namespace: namespace() },
      data,
    });
    const first = await applyObject(api, intent({ a: '1', b: '2' }), { fieldManager: 'platform-test' });
    expect(first.data).toEqual({ a: '1', b: '2' });
    const second = await applyObject(api, intent({ a: '1' }), {
      fieldManager: 'platform-test',
      resource: configMaps,
    });
    expect(second.data).toEqual({ a: '1' });
    expect(second.metadata?.managedFields?.map((f) => f.manager)).toContain('platform-test');

    const conflict = await applyObject(api, intent({ a: 'other' }), { fieldManager: 'someone-else' }).catch(
      (err: unknown) => err,
    );
    expect(isApiError(conflict, 409)).toBe(true);
    const forced = await applyObject(api, intent({ a: 'other' }), {
      fieldManager: 'someone-else',
      force: true,
    });
    expect(forced.data).toEqual({ a: 'other' });
  });

  it('events: a repeat becomes a series on the same Event; a different note is a new Event', async () => {
    const target = await create('evented');
    const recorder = new EventRecorder({
      api,
      clock: systemClock,
      logger: pino({ level: 'silent' }),
      reportingController: 'platform.io/test-controller',
      reportingInstance: 'test-0',
    });
    const regarding = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      namespace: namespace(),
      name: 'evented',
      uid: target.metadata?.uid,
    };
    const input = {
      type: 'Warning' as const,
      reason: 'SomethingBroke',
      action: 'Reconcile',
      note: 'it broke',
    };
    await recorder.record(regarding, input);
    await recorder.record(regarding, input);
    await recorder.record(regarding, input);
    await recorder.record(regarding, { ...input, note: 'it broke differently' });

    const events = await api.request<ObjectList<Record<string, unknown>>>({
      method: 'GET',
      path: collectionPath(eventResource, namespace()),
    });
    const ours = events.items.filter((e) => (e.regarding as { name?: string }).name === 'evented');
    expect(ours).toHaveLength(2);
    const repeated = ours.find((e) => e.note === 'it broke');
    expect(repeated).toMatchObject({
      reason: 'SomethingBroke',
      action: 'Reconcile',
      type: 'Warning',
      reportingController: 'platform.io/test-controller',
      reportingInstance: 'test-0',
      series: { count: 3 },
    });
    expect(ours.find((e) => e.note === 'it broke differently')?.series).toBeUndefined();
  });
});
