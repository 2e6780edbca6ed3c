'use strict';
// @confluentinc/kafka-javascript (librdkafka inside), node-rdkafka style API: AdminClient creates a
// 6-partition topic, an idempotent Producer (acks=all) sends N keyed records with delivery reports,
// a KafkaConsumer with assign() (group.id is required by librdkafka but no group is joined, no commits)
// reads them all back.
const Kafka = require('@confluentinc/kafka-javascript');
const { version } = require('@confluentinc/kafka-javascript/package.json');
const { PARTITIONS, Checks, env, items, withTimeout, verifyRecords } = require('./common');

function promisify(fn) { return new Promise((res, rej) => fn((err, v) => (err ? rej(err) : res(v)))); }

async function main() {
  const bootstrap = env('BOOTSTRAP', '127.0.0.1:9092');
  const prefix = env('TOPIC_PREFIX', `compat-${Date.now()}`);
  const n = Number(env('CONFLUENT_JS_RECORDS', '20000'));
  console.log(`CLIENT_VERSION: @confluentinc/kafka-javascript ${version} (librdkafka ${Kafka.librdkafkaVersion})`);
  console.log(`bootstrap=${bootstrap} prefix=${prefix} records=${n}`);
  const ch = new Checks();
  const topic = `${prefix}-confluent-js`;

  const created = await ch.run('AdminClient.createTopic(6 partitions)', async () => {
    const admin = Kafka.AdminClient.create({ 'bootstrap.servers': bootstrap });
    try {
      await promisify((cb) => admin.createTopic({ topic, num_partitions: PARTITIONS, replication_factor: 1 }, 30000, cb));
    } finally { admin.disconnect(); }
  });
  if (!created) ch.finish();

  const recs = items(n, 'c');
  const expected = new Map(recs.map((r) => [r.value, r.key]));
  const acked = new Map();
  const produced = await ch.run(`Producer(idempotent, acks=all) ${n} keyed records all acknowledged`, async () => {
    const p = new Kafka.Producer({ 'bootstrap.servers': bootstrap, 'enable.idempotence': true, acks: 'all',
      'linger.ms': 5, dr_msg_cb: true, 'queue.buffering.max.messages': 200000 });
    const errors = [];
    p.on('delivery-report', (err, r) => {
      if (err) errors.push(String(err)); else acked.set(r.value.toString(), { partition: r.partition, offset: r.offset });
    });
    await withTimeout(new Promise((res, rej) => { p.once('ready', res); p.once('connection.failure', rej); p.connect(); }), 30000, 'producer connect');
    p.setPollInterval(20);
    const t = Date.now();
    try {
      for (const r of recs) p.produce(topic, null, Buffer.from(r.value), Buffer.from(r.key));
      await promisify((cb) => p.flush(60000, cb));
      const deadline = Date.now() + 30000;
      while (acked.size + errors.length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    } finally { await new Promise((res) => p.disconnect(res)); }
    if (errors.length) return `${errors.length} delivery errors, first: ${errors[0]}`;
    if (acked.size !== n) return `${acked.size} delivery reports, want ${n}`;
    return `ok ${n} acked in ${((Date.now() - t) / 1000).toFixed(1)}s`;
  });

  if (produced) {
    await ch.run(`KafkaConsumer(assign, no group join) reads back ${n}: count, values, per-key partition, contiguous offsets`, async () => {
      const c = new Kafka.KafkaConsumer({ 'bootstrap.servers': bootstrap, 'group.id': `${prefix}-assign-only`,
        'enable.auto.commit': false, 'enable.partition.eof': false }, { 'auto.offset.reset': 'earliest' });
      await withTimeout(new Promise((res, rej) => { c.once('ready', res); c.connect({}, (e) => e && rej(e)); }), 30000, 'consumer connect');
      const got = [];
      try {
        c.assign([...Array(PARTITIONS).keys()].map((p) => ({ topic, partition: p, offset: 0 })));
        const deadline = Date.now() + 60000;
        while (got.length < n && Date.now() < deadline) {
          const msgs = await promisify((cb) => c.consume(5000, cb));
          for (const m of msgs) got.push({ partition: m.partition, offset: m.offset, key: m.key.toString(), value: m.value.toString() });
        }
      } finally { await new Promise((res) => c.disconnect(res)); }
      return verifyRecords(got, expected, acked);
    });
  }
  ch.finish();
}

main().catch((e) => { console.log(`FAIL suite: ${e && e.stack}`); console.log('0 passed, 1 failed'); process.exit(1); });
