import { PassThrough } from 'node:stream';
import { text } from 'node:stream/consumers';
import { describe, expect, test } from 'vitest';
import {
  JsonDocumentSplitter,
  RedactingStream,
  redactAccessKeys,
  redactDocuments,
  UnredactableAnswer,
} from './redact.ts';

const secretKey = {
  kind: 'OwnedAccessKey',
  metadata: {
    name: 'k',
    annotations: {
      'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify({ spec: { key: 'pak_plain' } }),
    },
  },
  spec: {
    key: 'pak_stray',
    identity: { connector: 'c', connectorData: 'CONNECTOR-SECRET' },
    oidcLogin: {
      idToken: 'ID-TOKEN',
      accessToken: 'ACCESS-TOKEN',
      refreshToken: 'REFRESH-TOKEN',
      lastRefresh: 't',
    },
  },
};
const SECRETS = ['pak_plain', 'pak_stray', 'CONNECTOR-SECRET', 'ID-TOKEN', 'ACCESS-TOKEN', 'REFRESH-TOKEN'];
const leaks = (value: unknown) => SECRETS.filter((secret) => JSON.stringify(value).includes(secret));

describe('redaction of access keys, every shape of answer', () => {
  const { kind: _kind, ...withoutKind } = secretKey;
  test.each([
    ['an object', secretKey],
    ['a list (items without kind)', { kind: 'OwnedAccessKeyList', items: [withoutKind, secretKey] }],
    ['a table with objects', { kind: 'Table', rows: [{ cells: [], object: secretKey }] }],
    [
      'a table with partial objects',
      { kind: 'Table', rows: [{ object: { kind: 'PartialObjectMetadata', metadata: secretKey.metadata } }] },
    ],
    ['a watch event', { type: 'MODIFIED', object: secretKey }],
  ])('%s', (_name, answer) => {
    const redacted = redactAccessKeys(answer);
    expect(leaks(redacted)).toEqual([]);
    // What is not secret stays.
    expect(JSON.stringify(redacted)).toContain('"name":"k"');
  });

  test('the OIDC login keeps its refresh time, the connector its name', () => {
    const redacted = redactAccessKeys(secretKey) as typeof secretKey;
    expect(redacted.spec.oidcLogin).toEqual({ lastRefresh: 't' });
    expect(redacted.spec.identity).toEqual({ connector: 'c' });
  });

  test('whole answers: one document, or several (however the request spelled watch), pretty or not', () => {
    expect(leaks(redactDocuments(JSON.stringify(secretKey, null, 2), redactAccessKeys))).toEqual([]);
    const stream = `${JSON.stringify({ type: 'ADDED', object: secretKey })}\n${JSON.stringify({ type: 'MODIFIED', object: secretKey }, null, 1)}\n`;
    const documents = redactDocuments(stream, redactAccessKeys);
    expect('many' in documents && documents.many.length).toBe(2);
    expect(leaks(documents)).toEqual([]);
    expect(() => redactDocuments('not json', redactAccessKeys)).toThrow(UnredactableAnswer);
    expect(() => redactDocuments('{"a": ', redactAccessKeys)).toThrow(UnredactableAnswer);
  });

  test('the splitter finds documents across chunk boundaries and inside strings', () => {
    const splitter = new JsonDocumentSplitter();
    expect(splitter.push('{"a":"}{\\"')).toEqual([]);
    expect(splitter.push('"}  [1,')).toEqual(['{"a":"}{\\""}']);
    expect(splitter.push('2]\n')).toEqual(['  [1,2]']);
    splitter.end();
  });

  test('a stream of events is redacted event by event; garbage cuts it', async () => {
    const input = new PassThrough();
    const output = input.pipe(new RedactingStream(redactAccessKeys));
    const event = JSON.stringify({ type: 'ADDED', object: secretKey });
    input.write(event.slice(0, 30));
    input.end(`${event.slice(30)}\n`);
    const out = await text(output);
    expect(leaks(out)).toEqual([]);
    expect(JSON.parse(out).type).toBe('ADDED');
    const bad = new PassThrough();
    const cut = bad.pipe(new RedactingStream(redactAccessKeys));
    bad.end('plain text with pak_plain');
    await expect(text(cut)).rejects.toBeInstanceOf(UnredactableAnswer);
  });
});
