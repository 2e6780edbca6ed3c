// A Kafka-protocol sink for scripts/bench: accepts produce and stores nothing. It bounds what the client
// side (ProducerPerformance on its one core) can push, so broker numbers can be read against it.
//
//   BenchSink PORT PARTITIONS
//
// Answers ApiVersions, Metadata (every requested topic exists with PARTITIONS partitions, led by this
// node), Produce (every partition succeeds; offsets are per-partition counters) and InitProducerId.
// Requests are decoded and responses encoded with kafka-clients' own message classes. One thread per
// connection; responses in request order; acks=0 produce gets no response.
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.ApiVersionsResponseData;
import org.apache.kafka.common.message.InitProducerIdResponseData;
import org.apache.kafka.common.message.MetadataRequestData;
import org.apache.kafka.common.message.MetadataResponseData;
import org.apache.kafka.common.message.ProduceRequestData;
import org.apache.kafka.common.message.ProduceResponseData;
import org.apache.kafka.common.message.ResponseHeaderData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.requests.RequestHeader;

public class BenchSink {
    static int port;
    static int partitions;
    static final ConcurrentHashMap<String, Uuid> TOPIC_IDS = new ConcurrentHashMap<>();
    static final ConcurrentHashMap<String, AtomicLong> OFFSETS = new ConcurrentHashMap<>();
    static final AtomicLong PRODUCER_IDS = new AtomicLong(1000);

    public static void main(String[] args) throws Exception {
        port = Integer.parseInt(args[0]);
        partitions = Integer.parseInt(args[1]);
        try (ServerSocket ss = new ServerSocket(port, 128, InetAddress.getByName("127.0.0.1"))) {
            System.out.println("sink listening on 127.0.0.1:" + port);
            while (true) {
                Socket s = ss.accept();
                s.setTcpNoDelay(true);
                Thread t = new Thread(() -> serve(s));
                t.setDaemon(true);
                t.start();
            }
        }
    }

    static void serve(Socket s) {
        try (s;
             DataInputStream in = new DataInputStream(new BufferedInputStream(s.getInputStream(), 1 << 20));
             DataOutputStream out = new DataOutputStream(new BufferedOutputStream(s.getOutputStream(), 1 << 16))) {
            while (true) {
                int size = in.readInt();
                byte[] frame = new byte[size];
                in.readFully(frame);
                ByteBuffer buf = ByteBuffer.wrap(frame);
                RequestHeader header = RequestHeader.parse(buf);
                short v = header.apiVersion();
                ByteBufferAccessor body = new ByteBufferAccessor(buf);
                ApiMessage resp;
                switch (header.apiKey()) {
                    case API_VERSIONS: resp = apiVersions(); break;
                    case METADATA: resp = metadata(new MetadataRequestData(body, v)); break;
                    case PRODUCE: {
                        ProduceRequestData req = new ProduceRequestData(body, v);
                        resp = produce(req);
                        if (req.acks() == 0) continue;
                        break;
                    }
                    case INIT_PRODUCER_ID:
                        resp = new InitProducerIdResponseData().setProducerId(PRODUCER_IDS.getAndIncrement())
                                .setProducerEpoch((short) 0);
                        break;
                    default:
                        System.err.println("sink: unsupported " + header.apiKey() + " v" + v);
                        return;
                }
                short hv = header.apiKey().responseHeaderVersion(v);
                ByteBuffer h = MessageUtil.toByteBufferAccessor(
                        new ResponseHeaderData().setCorrelationId(header.correlationId()), hv).buffer();
                ByteBuffer b = MessageUtil.toByteBufferAccessor(resp, v).buffer();
                out.writeInt(h.remaining() + b.remaining());
                out.write(h.array(), h.arrayOffset() + h.position(), h.remaining());
                out.write(b.array(), b.arrayOffset() + b.position(), b.remaining());
                if (in.available() == 0) out.flush();
            }
        } catch (EOFException e) {
            // client closed
        } catch (Exception e) {
            System.err.println("sink: connection failed: " + e);
        }
    }

    static ApiVersionsResponseData apiVersions() {
        ApiVersionsResponseData.ApiVersionCollection keys = new ApiVersionsResponseData.ApiVersionCollection();
        keys.add(new ApiVersionsResponseData.ApiVersion().setApiKey(ApiKeys.PRODUCE.id).setMinVersion((short) 3).setMaxVersion((short) 11));
        keys.add(new ApiVersionsResponseData.ApiVersion().setApiKey(ApiKeys.METADATA.id).setMinVersion((short) 0).setMaxVersion((short) 12));
        keys.add(new ApiVersionsResponseData.ApiVersion().setApiKey(ApiKeys.API_VERSIONS.id).setMinVersion((short) 0).setMaxVersion((short) 3));
        keys.add(new ApiVersionsResponseData.ApiVersion().setApiKey(ApiKeys.INIT_PRODUCER_ID.id).setMinVersion((short) 0).setMaxVersion((short) 4));
        return new ApiVersionsResponseData().setErrorCode((short) 0).setApiKeys(keys);
    }

    static MetadataResponseData metadata(MetadataRequestData req) {
        MetadataResponseData r = new MetadataResponseData().setClusterId("bench-sink").setControllerId(0);
        r.brokers().add(new MetadataResponseData.MetadataResponseBroker().setNodeId(0).setHost("127.0.0.1").setPort(port));
        if (req.topics() != null) {
            for (MetadataRequestData.MetadataRequestTopic t : req.topics()) {
                if (t.name() == null) continue;
                List<MetadataResponseData.MetadataResponsePartition> ps = new ArrayList<>();
                for (int i = 0; i < partitions; i++) {
                    ps.add(new MetadataResponseData.MetadataResponsePartition().setPartitionIndex(i).setLeaderId(0)
                            .setLeaderEpoch(0).setReplicaNodes(List.of(0)).setIsrNodes(List.of(0)));
                }
                r.topics().add(new MetadataResponseData.MetadataResponseTopic().setName(t.name())
                        .setTopicId(TOPIC_IDS.computeIfAbsent(t.name(), n -> Uuid.randomUuid())).setPartitions(ps));
            }
        }
        return r;
    }

    static ProduceResponseData produce(ProduceRequestData req) {
        ProduceResponseData r = new ProduceResponseData();
        for (ProduceRequestData.TopicProduceData t : req.topicData()) {
            ProduceResponseData.TopicProduceResponse tr = new ProduceResponseData.TopicProduceResponse().setName(t.name());
            for (ProduceRequestData.PartitionProduceData p : t.partitionData()) {
                long n = 0;
                if (p.records() instanceof MemoryRecords) {
                    for (RecordBatch batch : ((MemoryRecords) p.records()).batches()) n += batch.lastOffset() - batch.baseOffset() + 1;
                }
                long base = OFFSETS.computeIfAbsent(t.name() + "-" + p.index(), k -> new AtomicLong()).getAndAdd(n);
                tr.partitionResponses().add(new ProduceResponseData.PartitionProduceResponse().setIndex(p.index())
                        .setErrorCode((short) 0).setBaseOffset(base).setLogAppendTimeMs(-1).setLogStartOffset(0));
            }
            r.responses().add(tr);
        }
        return r;
    }
}
