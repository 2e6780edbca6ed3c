'use strict';
// kafkajs: admin creates a 6-partition topic, an idempotent producer (acks=all) sends N keyed records,
// admin.fetchTopicOffsets (ListOffsets, no group) shows all N stored; kafkajs has no assign()-style consumer,
// so reading the records back goes through a consumer group (subscribe + run).
const { Kafka, logLevel } = require('kafkajs');
const { version } = require('kafkajs/package.json');
const { PARTITIONS, Checks, env, items, withTimeout, verifyRecords } = require('./common');

async function main() {
  const bootstrap = env('BOOTSTRAP', '127.0.0.1:9092');
  const prefix = env('TOPIC_PREFIX', `compat-${Date.now()}`);
  const n = Number(env('KAFKAJS_RECORDS', '10000'));
  console.log(`CLIENT_VERSION: kafkajs ${version}`);
  console.log(`bootstrap=${bootstrap} prefix=${prefix} records=${n}`);
  const ch = new Checks();
  const topic = `${prefix}-kafkajs`;
  const kafka = new Kafka({ clientId: 'sluice-compat-kafkajs', brokers: [bootstrap], logLevel: logLevel.NOTHING,
    retry: { retries: 5 } });

  const admin = kafka.admin();
  const created = await ch.run('admin.createTopics(6 partitions, waitForLeaders)', async () => {
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }], waitForLeaders: true, timeout: 30000 });
    const md = await admin.fetchTopicMetadata({ topics: [topic] });
    const parts = md.topics[0].partitions.length;
    return parts === PARTITIONS ? undefined : `metadata shows ${parts} partitions`;
  });
  if (!created) { await admin.disconnect(); ch.finish(); }

  const recs = items(n, 'j');
  const expected = new Map(recs.map((r) => [r.value, r.key]));
  const produced = await ch.run(`producer(idempotent, acks=all) ${n} keyed records all acknowledged`, async () => {
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const t = Date.now();
    let acked = 0;
    try {
      for (let i = 0; i < recs.length; i += 1000) {
        const res = await producer.send({ topic, acks: -1, messages: recs.slice(i, i + 1000) });
        for (const r of res) {
          if (r.errorCode !== 0) return `partition ${r.partition} errorCode ${r.errorCode}`;
        }
        acked += Math.min(1000, recs.length - i);
      }
    } finally { await producer.disconnect(); }
    return `ok ${acked} acked in ${((Date.now() - t) / 1000).toFixed(1)}s`;
  });

  if (produced) {
    await ch.run(`admin.fetchTopicOffsets (ListOffsets, no group): ${n} records stored from offset 0`, async () => {
      const offs = await admin.fetchTopicOffsets(topic);
      let total = 0;
      for (const o of offs) {
        if (Number(o.low) !== 0) return `partition ${o.partition} low offset ${o.low}`;
        total += Number(o.high);
      }
      return total === n ? `ok ${offs.length} partitions, high watermarks sum ${total}` : `high watermarks sum ${total}, want ${n}`;
    });

    await ch.run(`consumer(group, subscribe fromBeginning) reads back ${n}: count, values, per-key partition, contiguous offsets`, async () => {
      const consumer = kafka.consumer({ groupId: `${prefix}-kafkajs`, retry: { retries: 2 } });
      const got = [];
      let done;
      const all = new Promise((res) => { done = res; });
      try {
        await withTimeout((async () => {
          await consumer.connect();
          await consumer.subscribe({ topic, fromBeginning: true });
          await consumer.run({ autoCommit: false, eachBatch: async ({ batch }) => {
            for (const m of batch.messages) {
              got.push({ partition: batch.partition, offset: Number(m.offset), key: m.key.toString(), value: m.value.toString() });
            }
            if (got.length >= n) done();
          } });
          await all;
        })(), Number(env('KAFKAJS_CONSUME_TIMEOUT_MS', '20000')), `consumer group read (${got.length} records so far)`);
      } finally {
        await withTimeout(consumer.disconnect(), 10000, 'consumer.disconnect').catch(() => {});
      }
      return verifyRecords(got, expected, null);
    });
  }
  await withTimeout(admin.disconnect(), 10000, 'admin.disconnect').catch(() => {});
  ch.finish();
}

main().catch((e) => { console.log(`FAIL suite: ${e && e.stack}`); console.log('0 passed, 1 failed'); process.exit(1); });
