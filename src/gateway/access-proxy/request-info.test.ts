import { describe, expect, test } from 'vitest';
import { StatusError } from '../../api/status.ts';
import { kubernetesQuery, parseFieldSelector, type RequestInfo, requestInfo } from './request-info.ts';

/** Reads `url` (path and raw query) as the target would: the path percent-decoded, the query as Go reads it. */
function read(method: string, url: string): RequestInfo {
  const [path = '', raw = ''] = url.split('?', 2);
  const query = kubernetesQuery(raw);
  if (query instanceof StatusError) throw query;
  const info = requestInfo(method, decodeURIComponent(path), query);
  if (info instanceof StatusError) throw info;
  return info;
}

type Row = [
  method: string,
  url: string,
  verb: string,
  group: string,
  namespace: string,
  resource: string,
  subresource: string,
  name: string,
];

describe('RequestInfo as kube-apiserver reads it (TestGetAPIRequestInfo, requestinfo_test.go)', () => {
  const rows: Row[] = [
    // resource paths
    ['GET', '/api/v1/namespaces', 'list', '', '', 'namespaces', '', ''],
    ['GET', '/api/v1/namespaces/other', 'get', '', 'other', 'namespaces', '', 'other'],
    ['GET', '/api/v1/namespaces/other/pods', 'list', '', 'other', 'pods', '', ''],
    ['GET', '/api/v1/namespaces/other/pods/foo', 'get', '', 'other', 'pods', '', 'foo'],
    ['HEAD', '/api/v1/namespaces/other/pods/foo', 'get', '', 'other', 'pods', '', 'foo'],
    ['GET', '/api/v1/pods', 'list', '', '', 'pods', '', ''],
    ['HEAD', '/api/v1/pods', 'list', '', '', 'pods', '', ''],
    [
      'PATCH',
      '/api/v1/namespaces/new-namespace',
      'patch',
      '',
      'new-namespace',
      'namespaces',
      '',
      'new-namespace',
    ],
    // special verbs
    ['GET', '/api/v1/proxy/namespaces/other/pods/foo', 'proxy', '', 'other', 'pods', '', 'foo'],
    [
      'GET',
      '/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource',
      'proxy',
      '',
      'other',
      'pods',
      '',
      'foo',
    ],
    ['GET', '/api/v1/watch/pods', 'watch', '', '', 'pods', '', ''],
    ['GET', '/api/v1/pods?watch=true', 'watch', '', '', 'pods', '', ''],
    ['GET', '/api/v1/pods?watch=false', 'list', '', '', 'pods', '', ''],
    ['GET', '/api/v1/watch/namespaces/other/pods', 'watch', '', 'other', 'pods', '', ''],
    ['GET', '/api/v1/namespaces/other/pods?watch=1', 'watch', '', 'other', 'pods', '', ''],
    ['GET', '/api/v1/namespaces/other/pods?watch=0', 'list', '', 'other', 'pods', '', ''],
    // subresource identification
    ['GET', '/api/v1/namespaces/other/pods/foo/status', 'get', '', 'other', 'pods', 'status', 'foo'],
    ['GET', '/api/v1/namespaces/other/pods/foo/proxy/subpath', 'get', '', 'other', 'pods', 'proxy', 'foo'],
    ['PUT', '/api/v1/namespaces/other/finalize', 'update', '', 'other', 'namespaces', 'finalize', 'other'],
    ['PUT', '/api/v1/namespaces/other/status', 'update', '', 'other', 'namespaces', 'status', 'other'],
    // verb identification
    ['PATCH', '/api/v1/namespaces/other/pods/foo', 'patch', '', 'other', 'pods', '', 'foo'],
    ['DELETE', '/api/v1/namespaces/other/pods/foo', 'delete', '', 'other', 'pods', '', 'foo'],
    ['POST', '/api/v1/namespaces/other/pods', 'create', '', 'other', 'pods', '', ''],
    // deletecollection verb identification
    ['DELETE', '/api/v1/nodes', 'deletecollection', '', '', 'nodes', '', ''],
    ['DELETE', '/api/v1/namespaces', 'deletecollection', '', '', 'namespaces', '', ''],
    ['DELETE', '/api/v1/namespaces/other/pods', 'deletecollection', '', 'other', 'pods', '', ''],
    [
      'DELETE',
      '/apis/extensions/v1/namespaces/other/pods',
      'deletecollection',
      'extensions',
      'other',
      'pods',
      '',
      '',
    ],
    // api group and version identification
    ['POST', '/apis/extensions/v1/namespaces/other/pods', 'create', 'extensions', 'other', 'pods', '', ''],
    [
      'POST',
      '/apis/extensions/v1beta3/namespaces/other/pods',
      'create',
      'extensions',
      'other',
      'pods',
      '',
      '',
    ],
  ];
  test.each(rows)('%s %s', (method, url, verb, apiGroup, namespace, resource, subresource, name) => {
    expect(read(method, url)).toMatchObject({
      resourceRequest: true,
      verb,
      apiGroup,
      namespace,
      resource,
      subresource,
      name,
    });
  });

  test.each([
    ['no resource path', '/'],
    ['just apiversion', '/api/version/'],
    ['just prefix, group, version', '/apis/group/version/'],
    ['bad prefix', '/badprefix/version/resource'],
    ['missing api group', '/apis/version/resource'],
    ['group without enough steps', '/apis/extensions/v1beta1'],
    ['not enough steps', '/api/version'],
    ['one step', '/api'],
    ['empty', ''],
  ])('%s (%s) is a non-resource request, its verb the lower-cased method', (_, path) => {
    expect(read('GET', path)).toEqual({
      verb: 'get',
      resourceRequest: false,
      apiGroup: '',
      resource: '',
      subresource: '',
      name: '',
      namespace: '',
      path,
    });
  });

  test.each([
    ['simple groupless', '/api/version/resource', 'resource', '', ''],
    ['simple group', '/apis/group/version/resource/name/subresource', 'resource', 'name', 'subresource'],
    ['more steps', '/api/version/resource/name/subresource', 'resource', 'name', 'subresource'],
    ['group list', '/apis/batch/v1/job', 'job', '', ''],
    ['group get', '/apis/batch/v1/job/foo', 'job', 'foo', ''],
    ['group subresource', '/apis/batch/v1/job/foo/scale', 'job', 'foo', 'scale'],
  ])('%s (%s) is a resource request (TestGetNonAPIRequestInfo)', (_, path, resource, name, subresource) => {
    expect(read('GET', path)).toMatchObject({ resourceRequest: true, resource, name, subresource });
  });

  test('a method kube-apiserver has no verb for reads as the empty verb on a resource, lower-cased elsewhere', () => {
    expect(read('OPTIONS', '/api/v1/namespaces/other/pods').verb).toBe('');
    expect(read('OPTIONS', '/version').verb).toBe('options');
  });

  test('a path verb with nothing after it is refused, as kube-apiserver fails to read it', () => {
    for (const path of ['/api/v1/watch', '/apis/apps/v1/proxy/']) {
      const info = requestInfo('GET', path, new URLSearchParams());
      expect(info).toBeInstanceOf(StatusError);
      expect((info as StatusError).code).toBe(400);
    }
  });

  test('a namespace with nothing but an unknown step after it makes that step the resource, in the namespace', () => {
    expect(read('GET', '/api/v1/namespaces/other/namespaces/x')).toMatchObject({
      namespace: 'other',
      resource: 'namespaces',
      name: 'x',
    });
    expect(read('GET', '/api/v1/namespaces/other/namespaces')).toMatchObject({
      verb: 'list',
      namespace: 'other',
      resource: 'namespaces',
      name: '',
    });
  });
});

describe('watch and the name of a collection read (TestFieldSelectorParsing and Convert_Slice_string_To_bool)', () => {
  test.each([
    ['no selector', '', 'list', ''],
    ['metadata.name selector', 'fieldSelector=metadata.name=name1', 'list', 'name1'],
    ['metadata.name selector with watch', 'watch=true&fieldSelector=metadata.name=name1', 'watch', 'name1'],
    ['random selector', 'fieldSelector=foo=bar', 'list', ''],
    ['invalid selector with metadata.name', 'fieldSelector=metadata.name=name1,foo', 'list', ''],
    ['invalid selector with watch', 'fieldSelector=metadata.name=name1,foo&watch=true', 'watch', ''],
    ['invalid selector with watch false', 'fieldSelector=metadata.name=name1,foo&watch=false', 'list', ''],
    ['== names too', 'fieldSelector=metadata.name%3D%3Dname1', 'list', 'name1'],
    ['!= names nothing', 'fieldSelector=metadata.name!%3Dname1', 'list', ''],
    ['among other terms', 'fieldSelector=status.phase%3DRunning,metadata.name%3Dname1', 'list', 'name1'],
    [
      'the first term in byte order wins',
      'fieldSelector=metadata.name%3Db,metadata.name%3D%3Da',
      'list',
      'a',
    ],
    ['escapes are read', 'fieldSelector=metadata.name%3Da%5C%2Cb', 'list', 'a,b'],
    ['an unknown escape fails the selector', 'fieldSelector=metadata.name%3Da%5Cb', 'list', ''],
    ['an unescaped = fails the selector', 'fieldSelector=metadata.name%3Da%3Db', 'list', ''],
    ['a name with / is no name', 'fieldSelector=metadata.name%3Da%2Fb', 'list', ''],
    ['a name with % is no name', 'fieldSelector=metadata.name%3Da%25b', 'list', ''],
    ['the name .. is no name', 'fieldSelector=metadata.name%3D..', 'list', ''],
    [
      'the first fieldSelector counts',
      'fieldSelector=metadata.name%3Da&fieldSelector=metadata.name%3Db',
      'list',
      'a',
    ],
    ['a limit that does not decode drops the name', 'fieldSelector=metadata.name%3Da&limit=ten', 'list', ''],
    [
      'a timeout that does not decode drops the name',
      'fieldSelector=metadata.name%3Da&timeoutSeconds=1.5',
      'list',
      '',
    ],
    [
      'a limit beyond int64 drops the name',
      'fieldSelector=metadata.name%3Da&limit=9223372036854775808',
      'list',
      '',
    ],
    ['a signed limit decodes', 'fieldSelector=metadata.name%3Da&limit=%2B5', 'list', 'a'],
    ['watch= (empty) is true', 'watch=', 'watch', ''],
    ['watch=FALSE is false', 'watch=FALSE', 'list', ''],
    ['the first watch counts', 'watch=0&watch=1', 'list', ''],
    ['watch=falſe is false under EqualFold', 'watch=fal%C5%BFe', 'list', ''],
    ['but true when the options do not decode (strings.ToLower)', 'watch=fal%C5%BFe&limit=x', 'watch', ''],
  ])('%s: ?%s', (_, query, verb, name) => {
    expect(read('GET', `/apis/group/version/resource?${query}`)).toMatchObject({ verb, name });
  });

  test('a named GET is a get whatever its query; a legacy watch path takes no name from a selector', () => {
    expect(read('GET', '/api/v1/namespaces/ns/pods/a?watch=true')).toMatchObject({ verb: 'get', name: 'a' });
    expect(read('GET', '/api/v1/watch/pods?fieldSelector=metadata.name%3Da')).toMatchObject({
      verb: 'watch',
      name: '',
    });
  });

  test('a DELETE named by a field selector is still a deletecollection without a name', () => {
    expect(read('DELETE', '/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Da')).toMatchObject({
      verb: 'deletecollection',
      name: '',
    });
  });

  test('parseFieldSelector splits at unescaped commas and the first operator', () => {
    expect(parseFieldSelector('b!=x\\,y,a==1')).toEqual([
      { field: 'a', operator: '=', value: '1' },
      { field: 'b', operator: '!=', value: 'x,y' },
    ]);
    expect(parseFieldSelector('')).toEqual([]);
    expect(parseFieldSelector(',,')).toEqual([]);
    expect(parseFieldSelector('a')).toBeUndefined();
    expect(parseFieldSelector('a=b\\')).toBeUndefined();
  });
});

describe('the query as Go reads it', () => {
  const refused = (raw: string) => {
    const query = kubernetesQuery(raw);
    expect(query).toBeInstanceOf(StatusError);
    expect((query as StatusError).code).toBe(400);
  };

  test('pairs Go drops are refused, not read as a WHATWG parser reads them', () => {
    refused('fieldSelector=metadata.name%3Da,x;=y');
    refused('watch=false;x');
    refused('watch=%zz');
    refused('fieldSelector=metadata.name%3Da%');
    refused('%G0=1');
  });

  test('more parameters than Go reads (it then reads none) are refused', () => {
    refused(`fieldSelector=metadata.name%3Da${'&'.repeat(10_000)}`);
    const atLimit = kubernetesQuery(`fieldSelector=metadata.name%3Da${'&'.repeat(9_999)}`);
    expect(atLimit).toBeInstanceOf(URLSearchParams);
  });

  test('escapes that are not UTF-8, and raw characters no request line holds, are refused', () => {
    refused('fieldSelector=metadata.name%3Da%FF');
    refused('a=é');
    refused('a=b c');
  });

  test('+ is a space, a key without = has an empty value, empty pairs are skipped, a BOM is kept', () => {
    const query = kubernetesQuery('labelSelector=a+in+(b)&&watch&x=%2B&%EF%BB%BFwatch=0');
    expect(query).toBeInstanceOf(URLSearchParams);
    expect([...(query as URLSearchParams)]).toEqual([
      ['labelSelector', 'a in (b)'],
      ['watch', ''],
      ['x', '+'],
      ['\uFEFFwatch', '0'],
    ]);
  });

  test('a leading ? is part of the first key, as Go reads a raw query', () => {
    expect([...(kubernetesQuery('?watch=1') as URLSearchParams)]).toEqual([['?watch', '1']]);
  });
});
