import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { CanonicalJsonError } from '../../src/errors.js';
import { canonicalJson, compactJsonBytes, jsonDigest, jsonEquals, parseJson } from '../../src/json/index.js';
import type { JsonValue } from '../../src/json/types.js';
import { LIMITS } from '../../src/limits.js';
import { arbJsonValue } from '../support/arbitraries.js';

function fromBits(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

function nested(depth: number): JsonValue {
  let v: JsonValue = 1;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

describe('canonicalJson: RFC 8785 examples', () => {
  it('formats IEEE 754 numbers as in RFC 8785 Appendix B', () => {
    const cases: [string, string][] = [
      ['0000000000000000', '0'],
      ['8000000000000000', '0'],
      ['0000000000000001', '5e-324'],
      ['8000000000000001', '-5e-324'],
      ['7fefffffffffffff', '1.7976931348623157e+308'],
      ['ffefffffffffffff', '-1.7976931348623157e+308'],
      ['4340000000000000', '9007199254740992'],
      ['c340000000000000', '-9007199254740992'],
      ['4430000000000000', '295147905179352830000'],
      ['44b52d02c7e14af5', '9.999999999999997e+22'],
      ['44b52d02c7e14af6', '1e+23'],
      ['44b52d02c7e14af7', '1.0000000000000001e+23'],
      ['444b1ae4d6e2ef4e', '999999999999999700000'],
      ['444b1ae4d6e2ef4f', '999999999999999900000'],
      ['444b1ae4d6e2ef50', '1e+21'],
      ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
      ['3eb0c6f7a0b5ed8d', '0.000001'],
      ['41b3de4355555553', '333333333.3333332'],
      ['41b3de4355555554', '333333333.33333325'],
      ['41b3de4355555555', '333333333.3333333'],
      ['41b3de4355555556', '333333333.3333334'],
      ['41b3de4355555557', '333333333.33333343'],
      ['becbf647612f3696', '-0.0000033333333333333333'],
      ['43143ff3c1cb0959', '1424953923781206.2'],
    ];
    for (const [bits, expected] of cases) assert.equal(canonicalJson(fromBits(bits)), expected, bits);
    for (const bits of ['7fffffffffffffff', '7ff0000000000000', 'fff0000000000000']) {
      assert.throws(() => canonicalJson(fromBits(bits)), CanonicalJsonError, bits);
    }
  });

  it('canonicalizes the RFC 8785 §3.2.2 sample', () => {
    const input = String.raw`{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
      "literals": [null, true, false]
    }`;
    assert.equal(
      canonicalJson(parseJson(input)),
      String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
    );
  });

  it('sorts keys by UTF-16 code units (RFC 8785 §3.2.3)', () => {
    const input = String.raw`{
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis"
    }`;
    const expected: [string, string][] = [
      ['\r', 'Carriage Return'],
      ['1', 'One'],
      ['\u0080', 'Control'],
      ['\u00f6', 'Latin Small Letter O With Diaeresis'],
      ['\u20ac', 'Euro Sign'],
      ['\ud83d\ude00', 'Emoji: Grinning Face'],
      ['\ufb33', 'Hebrew Letter Dalet With Dagesh'],
    ];
    const text = `{${expected.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`;
    assert.equal(canonicalJson(parseJson(input)), text);
    assert.ok(text.startsWith('{"\\r":"Carriage Return","1":"One","\u0080":'));
  });

  it('sorts integer-like keys as strings, unlike Object.keys', () => {
    assert.equal(canonicalJson({ 10: 'a', 9: 'b', a: 1, '': 0 }), '{"":0,"10":"a","9":"b","a":1}');
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${39 - i}`, i]));
    const text = canonicalJson(many);
    const keys = [...text.matchAll(/"(k\d+)":/g)].map((m) => m[1]!);
    assert.deepEqual(keys, [...keys].sort());
  });

  it('escapes strings exactly like JSON.stringify and writes -0 as 0', () => {
    const s = '\u0000\u0001\u001f "\\/\b\f\n\r\t\u007f\u2028\u2029é😀';
    assert.equal(canonicalJson(s), JSON.stringify(s));
    assert.equal(canonicalJson(-0), '0');
    assert.equal(canonicalJson({ a: [-0, 1e21, 1e-7, 0.1] }), '{"a":[0,1e+21,1e-7,0.1]}');
    assert.equal(canonicalJson([]), '[]');
    assert.equal(canonicalJson({}), '{}');
    assert.equal(canonicalJson(Object.create(null) as object), '{}');
  });

  it('keeps a __proto__ own key as data', () => {
    const v = parseJson('{"b":1,"__proto__":{"x":1}}');
    assert.equal(canonicalJson(v), '{"__proto__":{"x":1},"b":1}');
  });
});

describe('canonicalJson: rejections', () => {
  const bad: [string, unknown][] = [
    ['NaN', NaN],
    ['Infinity', [Infinity]],
    ['-Infinity', { a: -Infinity }],
    ['undefined', undefined],
    ['undefined property', { a: undefined }],
    // biome-ignore lint/suspicious/noSparseArray: the hole is what this case tests
    ['array hole', [1, , 3]],
    ['function', { f: () => 1 }],
    ['symbol', Symbol('s')],
    ['bigint', { n: 1n }],
    ['lone high surrogate', 'a\ud800b'],
    ['lone low surrogate', ['\udc00']],
    ['reversed pair', '\udc00\ud800'],
    ['lone surrogate key', { '\ud800': 1 }],
    ['Date', new Date(0)],
    ['Map', new Map()],
    ['class instance', new (class Point {})()],
  ];
  for (const [name, value] of bad) {
    it(`rejects ${name}`, () => assert.throws(() => canonicalJson(value), CanonicalJsonError));
  }

  it('rejects cycles as cycles', () => {
    const a: Record<string, unknown> = {};
    a.self = a;
    assert.throws(() => canonicalJson(a), { name: 'CanonicalJsonError', message: /cycle/ });
    const arr: unknown[] = [];
    arr.push({ x: arr });
    assert.throws(() => canonicalJson(arr), /cycle/);
  });

  it('accepts shared (non-cyclic) references', () => {
    const shared = { k: 1 };
    assert.equal(canonicalJson([shared, shared]), '[{"k":1},{"k":1}]');
  });

  it('bounds depth at LIMITS.maxJsonDepth without overflowing the stack', () => {
    assert.equal(canonicalJson(nested(LIMITS.maxJsonDepth)).length, 2 * LIMITS.maxJsonDepth + 1);
    assert.throws(() => canonicalJson(nested(LIMITS.maxJsonDepth + 1)), /deeper/);
    assert.throws(() => canonicalJson(nested(100_000)), CanonicalJsonError);
  });

  it('stays usable after a failure (the pooled buffer is released)', () => {
    assert.throws(() => canonicalJson({ a: 'x'.repeat(100_000), b: NaN }));
    assert.equal(canonicalJson({ b: 1, a: 2 }), '{"a":2,"b":1}');
  });

  it('survives reentrant use from a getter', () => {
    const v = {
      get a(): string {
        return canonicalJson({ z: 1, y: 2 });
      },
      b: 'x',
    };
    assert.equal(canonicalJson(v), String.raw`{"a":"{\"y\":2,\"z\":1}","b":"x"}`);
  });
});

describe('jsonDigest, jsonEquals, compactJsonBytes', () => {
  it('digest is sha256 of the canonical UTF-8 text', () => {
    const v = { b: '€', a: [1, 2] };
    assert.equal(jsonDigest(v), createHash('sha256').update('{"a":[1,2],"b":"€"}', 'utf8').digest('hex'));
    assert.match(jsonDigest(null), /^[0-9a-f]{64}$/);
  });

  it('property: digest ignores key order', () => {
    fc.assert(
      fc.property(arbJsonValue(4), fc.infiniteStream(fc.boolean()), (value, flips) => {
        const shuffled = reorder(value, flips);
        assert.equal(jsonDigest(shuffled), jsonDigest(value));
        assert.ok(jsonEquals(shuffled, value));
      }),
      { numRuns: 200 },
    );
  });

  it('property: digest changes with any value change', () => {
    fc.assert(
      fc.property(arbJsonValue(4), fc.nat(), arbJsonValue(1), (value, pick, replacement) => {
        const mutated = mutate(value, pick, replacement);
        fc.pre(mutated.changed);
        assert.notEqual(jsonDigest(mutated.value), jsonDigest(value));
        assert.ok(!jsonEquals(mutated.value, value));
      }),
      { numRuns: 300 },
    );
  });

  it('property: canonical text parses back to an equal value', () => {
    fc.assert(
      fc.property(arbJsonValue(4), (value) => {
        assert.deepStrictEqual(parseJson(canonicalJson(value)), value);
      }),
      { numRuns: 200 },
    );
  });

  it('jsonEquals is false when a side cannot be canonicalized', () => {
    assert.equal(jsonEquals(NaN, NaN), false);
    assert.equal(jsonEquals({ a: undefined }, {}), false);
    assert.equal(jsonEquals('\ud800', '\ud800'), false);
    assert.equal(jsonEquals(1, 1.0), true);
    assert.equal(jsonEquals(0, -0), true);
    assert.equal(jsonEquals({ a: 1, b: 2 }, { b: 2, a: 1 }), true);
    assert.equal(jsonEquals([1, 2], [2, 1]), false);
  });

  it('compactJsonBytes counts UTF-8 bytes of JSON.stringify', () => {
    assert.equal(compactJsonBytes({ a: '€' }), 11);
    assert.equal(compactJsonBytes('😀'), 6);
    assert.equal(compactJsonBytes(null), 4);
    assert.throws(() => compactJsonBytes(undefined), CanonicalJsonError);
    assert.throws(() => compactJsonBytes(() => 1), CanonicalJsonError);
    assert.throws(() => compactJsonBytes({ n: 1n }), CanonicalJsonError);
    const cyclic: Record<string, unknown> = {};
    cyclic.c = cyclic;
    assert.throws(() => compactJsonBytes(cyclic), CanonicalJsonError);
  });

  it('canonicalizes a 1 MiB argument object to text that parses back to it', () => {
    const args = Object.fromEntries(Array.from({ length: 8_000 }, (_, i) => [`key${i}`, { text: 'x'.repeat(100), n: i, ok: true }]));
    assert.ok(compactJsonBytes(args) > 1_000_000);
    assert.deepEqual(JSON.parse(canonicalJson(args)), args);
    assert.match(jsonDigest(args), /^[0-9a-f]{64}$/);
  });
});

/** A copy of `value` with every object's keys inserted in an order decided by `flips`. */
function reorder(value: JsonValue, flips: fc.Stream<boolean>): JsonValue {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => reorder(v, flips));
  const keys = Object.keys(value);
  const order = flips.next().value ? keys.reverse() : keys.sort();
  const out: Record<string, JsonValue> = {};
  for (const key of order) {
    Object.defineProperty(out, key, { value: reorder(value[key]!, flips), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** Replaces the `pick`-th node (pre-order) with `replacement`; `changed` says whether the result differs. */
function mutate(value: JsonValue, pick: number, replacement: JsonValue): { value: JsonValue; changed: boolean } {
  let counter = 0;
  let target = -1;
  const count = (v: JsonValue): number =>
    1 + (v !== null && typeof v === 'object' ? (Array.isArray(v) ? v : Object.values(v)).reduce<number>((n, c) => n + count(c), 0) : 0);
  target = pick % count(value);
  let changed = false;
  const walk = (v: JsonValue): JsonValue => {
    if (counter++ === target) {
      changed = canonicalJson(v) !== canonicalJson(replacement);
      return replacement;
    }
    if (v === null || typeof v !== 'object') return v;
    if (Array.isArray(v)) return v.map(walk);
    const out: Record<string, JsonValue> = {};
    for (const key of Object.keys(v)) {
      Object.defineProperty(out, key, { value: walk(v[key]!), enumerable: true, writable: true, configurable: true });
    }
    return out;
  };
  const result = walk(value);
  return { value: result, changed };
}
