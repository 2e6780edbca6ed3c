'use strict';
// Shared helpers for the node compat suites: PASS/FAIL lines, the summary line, record verification.

const PARTITIONS = 6;

class Checks {
  constructor() { this.passed = 0; this.failed = 0; }
  check(name, ok, detail) {
    if (ok) { this.passed++; console.log(`PASS ${name}${detail ? ` (${detail})` : ''}`); }
    else { this.failed++; console.log(`FAIL ${name}: ${detail}`); }
    return ok;
  }
  // fn returns undefined / 'ok ...' on success or an error message; a throw fails the check
  async run(name, fn) {
    let res;
    try { res = await fn(); } catch (e) { return this.check(name, false, `${e && e.name}: ${e && e.message}`); }
    const ok = res === undefined || res === null || String(res).startsWith('ok');
    return this.check(name, ok, res ? String(res) : '');
  }
  finish() {
    console.log(`${this.passed} passed, ${this.failed} failed`);
    process.exit(this.failed === 0 ? 0 : 1);
  }
}

function env(name, dflt) { const v = process.env[name]; return v ? v : dflt; }

function items(n, tag) {
  const out = [];
  for (let i = 0; i < n; i++) {
    out.push({ key: `key-${i % 1009}`, value: `value-${String(i).padStart(7, '0')}-${tag.repeat(i % 64)}` });
  }
  return out;
}

function withTimeout(promise, ms, what) {
  let t;
  return Promise.race([promise, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`${what}: no result within ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(t));
}

// records: [{partition, offset, key, value}] (strings / numbers); expected: Map value -> key;
// acked: Map value -> {partition, offset} or null
function verifyRecords(records, expected, acked) {
  if (records.length !== expected.size) return `read ${records.length} records, want ${expected.size}`;
  const sorted = [...records].sort((a, b) => a.partition - b.partition || a.offset - b.offset);
  const seen = new Set(); const keyPart = new Map(); const next = new Map();
  for (const r of sorted) {
    if (!expected.has(r.value)) return `unexpected value ${r.value.slice(0, 40)} at ${r.partition}/${r.offset}`;
    if (seen.has(r.value)) return `duplicate value ${r.value.slice(0, 40)} at ${r.partition}/${r.offset}`;
    seen.add(r.value);
    if (expected.get(r.value) !== r.key) return `value ${r.value.slice(0, 40)} has key ${r.key}, want ${expected.get(r.value)}`;
    if (keyPart.has(r.key) && keyPart.get(r.key) !== r.partition) return `key ${r.key} on partitions ${keyPart.get(r.key)} and ${r.partition}`;
    keyPart.set(r.key, r.partition);
    const a = acked && acked.get(r.value);
    if (a && (a.partition !== r.partition || a.offset !== r.offset)) return `value ${r.value.slice(0, 40)} read at ${r.partition}/${r.offset}, acked at ${a.partition}/${a.offset}`;
    const want = next.get(r.partition) || 0;
    if (r.offset !== want) return `partition ${r.partition}: offset ${r.offset}, want ${want}`;
    next.set(r.partition, want + 1);
  }
  return `ok ${records.length} records, per partition ${JSON.stringify(Object.fromEntries(next))}`;
}

module.exports = { PARTITIONS, Checks, env, items, withTimeout, verifyRecords };
