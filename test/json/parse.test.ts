import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { JsonParseError, type JsonParseReason } from '../../src/errors.js';
import { parseJson } from '../../src/json/index.js';
import { LIMITS } from '../../src/limits.js';
import { arbJsonValue } from '../support/arbitraries.js';

function rejects(text: string, reason: JsonParseReason, offset?: number, options?: Parameters<typeof parseJson>[1]): void {
  assert.throws(
    () => parseJson(text, options),
    (error: unknown) => {
      assert.ok(error instanceof JsonParseError, `expected JsonParseError for ${JSON.stringify(text.slice(0, 60))}, got ${String(error)}`);
      assert.equal(error.reason, reason, `reason for ${JSON.stringify(text.slice(0, 60))}: ${error.message}`);
      assert.equal(error.code, 'invalid_json');
      if (offset !== undefined) assert.equal(error.offset, offset, `offset for ${JSON.stringify(text.slice(0, 60))}`);
      return true;
    },
  );
}

describe('parseJson: valid input', () => {
  it('parses every JSON form', () => {
    assert.deepStrictEqual(parseJson(' {"a":[1,-0.5e+2,1E-3,0,-0,true,false,null,"x\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9"],"b":{}} \n'), {
      a: [1, -50, 0.001, 0, -0, true, false, null, 'x"\\/\b\f\n\r\té'],
      b: {},
    });
    assert.equal(parseJson('"😀"'), '😀');
    assert.equal(parseJson('"\\ud83d\\ude00"'), '😀');
    assert.equal(parseJson('1e-400'), 0);
    assert.deepStrictEqual(parseJson('[]'), []);
  });

  it('property: parses whatever JSON.stringify writes, to an equal value', () => {
    fc.assert(
      fc.property(arbJsonValue(5), (value) => {
        assert.deepStrictEqual(parseJson(JSON.stringify(value)), value);
        assert.deepStrictEqual(parseJson(JSON.stringify(value, null, 2)), value);
      }),
      { numRuns: 300 },
    );
  });

  it('property: never throws anything but JsonParseError, and agrees with JSON.parse on what is valid', () => {
    const arbText = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 30 }),
      fc.string({ unit: fc.constantFrom(...'{}[],:"\\ 0123456789.eE+-truefalsnu\ud800\udc00'.split('')), maxLength: 30 }),
      arbJsonValue(3).chain((v) => {
        const text = JSON.stringify(v);
        return fc.nat(text.length).map((cut) => text.slice(0, cut));
      }),
    );
    fc.assert(
      fc.property(arbText, (text) => {
        let native: unknown;
        let nativeOk = true;
        try {
          native = JSON.parse(text);
        } catch {
          nativeOk = false;
        }
        try {
          const ours = parseJson(text);
          assert.ok(nativeOk, `accepted what JSON.parse rejects: ${JSON.stringify(text)}`);
          assert.deepStrictEqual(ours, native);
        } catch (error) {
          if (!(error instanceof JsonParseError)) throw error;
          // Stricter than JSON.parse only for duplicate keys, lone surrogates, numbers that overflow and unsafe integers.
          if (nativeOk) {
            const overflow = error.reason === 'syntax' && /[eE]|\d{309}/.test(text);
            const unsafe = error.reason === 'unsafe_integer' && /\d{16}/.test(text);
            assert.ok(['duplicate_key', 'lone_surrogate'].includes(error.reason) || overflow || unsafe, `${JSON.stringify(text)}: ${error.message}`);
          }
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('parseJson: rejections', () => {
  it('truncated input is unexpected_end', () => {
    for (const text of ['', '   ', '{', '[', '[1,', '{"a"', '{"a":', '{"a":1', '"abc', '"\\', '"\\u12', 'tru', 'nul', '-', '1.', '1e', '1e+', '"\\ud83d', '[1,2', '{"a":{"b":[]}']) {
      rejects(text, 'unexpected_end');
    }
    rejects('[1,', 'unexpected_end', 3);
  });

  it('trailing garbage is trailing_data', () => {
    rejects('{} x', 'trailing_data', 3);
    rejects('1 2', 'trailing_data', 2);
    rejects('[]]', 'trailing_data', 2);
    rejects('"a""b"', 'trailing_data', 3);
    rejects('null\u0000', 'trailing_data', 4);
  });

  it('wrong tokens and grammar are syntax errors', () => {
    const cases: [string, number][] = [
      ['{a:1}', 1],
      ["{'a':1}", 1],
      ['[1,]', 3],
      ['{"a":1,}', 7],
      ['[1 2]', 3],
      ['{"a" 1}', 5],
      ['{"a":1 "b":2}', 7],
      ['-01', 2],
      ['1.e5', 2],
      ['.5', 0],
      ['+1', 0],
      ['"\\x"', 1],
      ['"\\u12g4"', 5],
      ['"a\nb"', 2],
      ['"tab\there"', 4],
      ['trve', 0],
      ['\ufeff{}', 0],
    ];
    for (const [text, offset] of cases) rejects(text, 'syntax', offset);
    rejects('01', 'syntax', 1);
    rejects('0x10', 'trailing_data', 1);
    rejects('truex', 'trailing_data', 4);
    rejects('truth', 'syntax', 0);
    rejects('{"a":1}}', 'trailing_data', 7);
  });

  it('NaN, Infinity, comments and numbers that overflow are rejected', () => {
    for (const text of ['NaN', '[NaN]', 'Infinity', '-Infinity', '{"a":Infinity}', '1e400', '-1e309', '[1] // c', '/* c */ 1', '{"a":1 /* c */}']) {
      assert.throws(() => parseJson(text), JsonParseError, text);
    }
    rejects('1e400', 'syntax', 0);
    rejects(`1${'0'.repeat(400)}`, 'syntax', 0);
  });

  it('duplicate keys are rejected, also when spelled with escapes', () => {
    rejects('{"a":1,"a":2}', 'duplicate_key', 7);
    rejects('{"a":1,"\\u0061":2}', 'duplicate_key', 7);
    rejects('{"x":{"k":1,"k":1}}', 'duplicate_key', 12);
    rejects('{"__proto__":1,"__proto__":2}', 'duplicate_key');
    assert.deepStrictEqual(parseJson('{"a":{"a":1},"b":[{"a":1},{"a":2}]}'), { a: { a: 1 }, b: [{ a: 1 }, { a: 2 }] });
  });

  it('lone surrogates are rejected, escaped or raw, in values and keys', () => {
    rejects('"\\ud800"', 'lone_surrogate', 1);
    rejects('"\\udc00"', 'lone_surrogate', 1);
    rejects('"\\ud800\\u0041"', 'lone_surrogate', 1);
    rejects('"\\ud800\\ud800"', 'lone_surrogate', 1);
    rejects('"\\udc00\\ud800"', 'lone_surrogate', 1);
    rejects('"a\ud800"', 'lone_surrogate', 2);
    rejects('"\udc00b"', 'lone_surrogate', 1);
    rejects('"\ud83d\\ude00"', 'lone_surrogate', 1);
    rejects('{"\ud800":1}', 'lone_surrogate', 2);
    rejects('{"\\udfff":1}', 'lone_surrogate', 2);
    assert.equal(parseJson('"\ud83d\ude00\\ud83d\\ude00"'), '😀😀');
  });

  it('nesting deeper than the bound is too_deep: 10,000 and 100,000 deep never overflow the stack', () => {
    for (const depth of [LIMITS.maxJsonDepth + 1, 10_000, 100_000]) {
      rejects('['.repeat(depth) + ']'.repeat(depth), 'too_deep', LIMITS.maxJsonDepth);
      rejects('{"a":'.repeat(depth) + '1' + '}'.repeat(depth), 'too_deep', 5 * LIMITS.maxJsonDepth);
      rejects('['.repeat(depth), 'too_deep');
    }
    const atLimit = '['.repeat(LIMITS.maxJsonDepth) + ']'.repeat(LIMITS.maxJsonDepth);
    assert.ok(Array.isArray(parseJson(atLimit)));
    rejects('[[[]]]', 'too_deep', 2, { maxDepth: 2 });
    const deep = '['.repeat(10_000) + ']'.repeat(10_000);
    assert.ok(Array.isArray(parseJson(deep, { maxDepth: 10_000 })));
  });

  it('input over the size bound is too_large, counted in UTF-8 bytes', () => {
    rejects('"€€€"', 'too_large', 0, { maxBytes: 10 });
    assert.equal(parseJson('"€€€"', { maxBytes: 11 }), '€€€');
    rejects(JSON.stringify('😀'.repeat(3)), 'too_large', 0, { maxBytes: 13 });
    assert.equal(parseJson(JSON.stringify('😀'.repeat(3)), { maxBytes: 14 }), '😀😀😀');
    rejects('[1, 2]', 'too_large', 0, { maxBytes: 5 });
  });

  it('rejects a non-string input with a typed error', () => {
    assert.throws(() => parseJson(undefined as unknown as string), JsonParseError);
    assert.throws(() => parseJson(Buffer.from('{}') as unknown as string), JsonParseError);
  });
});

describe('parseJson: __proto__ and constructor are harmless', () => {
  it('become own data properties and change no prototype', () => {
    const v = parseJson('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"a":1}') as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
    assert.ok(Object.hasOwn(v, '__proto__'));
    assert.ok(Object.hasOwn(v, 'constructor'));
    assert.deepStrictEqual(Object.keys(v), ['__proto__', 'constructor', 'a']);
    assert.equal((v as { polluted?: unknown }).polluted, undefined);
    assert.equal(({} as { polluted?: unknown }).polluted, undefined);
    assert.equal((Object.prototype as { polluted?: unknown }).polluted, undefined);
    const nested = parseJson('[{"__proto__":[]}]') as Record<string, unknown>[];
    assert.ok(!Array.isArray(nested[0]));
    assert.ok(Array.isArray(Object.getOwnPropertyDescriptor(nested[0], '__proto__')?.value));
  });
});

describe('parseJson: a 16 MiB journal', () => {
  it('parses a 16 MiB journal exactly as JSON.parse does, and refuses it under a smaller bound', () => {
    const lines: string[] = [];
    let size = 2;
    for (let i = 0; size < 16 * 1024 * 1024; i++) {
      const line = JSON.stringify({
        event_id: `evt_${i}`,
        session_id: 'sess_1',
        turn_id: 'turn_1',
        seq: i,
        kind: { type: 'tool_call', call: { id: `toolcall_${i}`, name: 'search', arguments: { q: `héllo 😀 "${i}"\n`, n: i / 3, ok: true, list: [1, null, -2e10] } } },
      });
      lines.push(line);
      size += line.length + 1;
    }
    const text = `[${lines.join(',')}]`;
    assert.ok(text.length >= 16 * 1024 * 1024);
    assert.deepEqual(parseJson(text), JSON.parse(text));
    rejects(text, 'too_large', 0, { maxBytes: 16 * 1024 * 1024 });
  });

  it('parses a single 16 MiB string', () => {
    const text = JSON.stringify('é'.repeat(8 * 1024 * 1024 - 2));
    assert.equal((parseJson(text) as string).length, 8 * 1024 * 1024 - 2);
  });
});

describe('parseJson: integers are held exactly', () => {
  const unsafe = (text: string, path: string, offset: number) => {
    let thrown: unknown;
    try {
      parseJson(text);
    } catch (error) {
      thrown = error;
    }
    assert.ok(thrown instanceof JsonParseError, `${text}: ${String(thrown)}`);
    assert.equal(thrown.code, 'invalid_json');
    assert.equal(thrown.reason, 'unsafe_integer');
    assert.equal(thrown.path, path);
    assert.equal(thrown.offset, offset);
    assert.match(thrown.message, new RegExp(`at ${path.replace(/[$[\]."]/g, (c) => `\\${c}`)} is beyond`));
    assert.match(thrown.message, /send it as a string/);
  };

  it('finding 8: an integer literal beyond ±(2^53 − 1) is refused with its JSON path, never rounded', () => {
    unsafe('9007199254740992', '$', 0);
    unsafe('-9007199254740992', '$', 0);
    unsafe('{"amount":9007199254740993}', '$.amount', 10);
    unsafe('{"a":[1,{"b c":[0,-12345678901234567890]}]}', '$.a[1]["b c"][1]', 18);
    unsafe('[0,1,2,99999999999999999999999999999999]', '$[3]', 7);
    unsafe('{"kind":{"x":{},"y":[[],[100000000000000000000]]}}', '$.kind.y[1][0]', 25);
  });

  it('the boundary and every non-integer form are accepted as before', () => {
    assert.equal(parseJson('9007199254740991'), Number.MAX_SAFE_INTEGER);
    assert.equal(parseJson('-9007199254740991'), -Number.MAX_SAFE_INTEGER);
    assert.equal(parseJson('1000000000000000'), 1e15);
    assert.equal(parseJson('1e21'), 1e21);
    assert.equal(parseJson('0.5'), 0.5);
    assert.deepEqual(parseJson('{"a":[0,-0,12]}'), { a: [0, -0, 12] });
  });

  it('property: every safe integer parses to itself; every unsafe one is refused', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }), (n) => {
        const text = `[${n.toString()}]`;
        const safe = n >= -BigInt(Number.MAX_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER);
        if (safe) assert.deepEqual(parseJson(text), [Number(n)]);
        else assert.throws(() => parseJson(text), (e: unknown) => e instanceof JsonParseError && e.reason === 'unsafe_integer' && e.path === '$[0]');
      }),
      { numRuns: 500 },
    );
  });
});
