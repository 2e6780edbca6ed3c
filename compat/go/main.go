// franz-go compat suite: kadm creates a 6-partition topic, the (idempotent by default) producer sends
// N keyed records, a direct consumer (ConsumePartitions, no group) reads them all back.
// Prints PASS/FAIL per check and a final "N passed, N failed" line.
package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sluice/compat/go/internal/suite"
)

const partitions = 6

func key(i int) string   { return "key-" + strconv.Itoa(i%1013) }
func value(i int) string { return fmt.Sprintf("value-%07d-%s", i, strings.Repeat("z", i%64)) }

func main() {
	bootstrap, prefix := suite.Start()
	n, _ := strconv.Atoi(suite.Env("GO_RECORDS", "100000"))
	topic := prefix + "-go-roundtrip"
	fmt.Printf("bootstrap=%s prefix=%s records=%d\n", bootstrap, prefix, n)
	defer suite.Finish()

	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(suite.Seeds(bootstrap)...))
	if !suite.Check("kgo.NewClient", err, "") {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	err = func() error {
		resp, err := adm.CreateTopics(ctx, partitions, 1, nil, topic)
		if err != nil {
			return err
		}
		if r := resp[topic]; r.Err != nil {
			return fmt.Errorf("create %s: %w (%s)", topic, r.Err, r.ErrMessage)
		}
		// Metadata may take a moment to show the new topic: CreateTopics goes to the controller,
		// Metadata to any broker, which applies the creation a few ms later (as in Kafka). Each
		// check is a fresh Metadata request: kadm.ListTopics answers from franz-go's metadata
		// cache, which keeps an UNKNOWN_TOPIC_OR_PARTITION answer for MetadataMinAge (5 s), the
		// whole of this wait.
		for i := 0; i < 50; i++ {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 && len(resp.Topics[0].Partitions) == partitions {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Errorf("topic %s not visible with %d partitions in metadata", topic, partitions)
	}()
	if !suite.Check("kadm.CreateTopics(6 partitions)", err, "") {
		return
	}

	type ack struct {
		partition int32
		offset    int64
	}
	acks := make([]ack, n)
	var mu sync.Mutex
	var produceErrs []error
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		i := i
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(key(i)), Value: []byte(value(i))}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				produceErrs = append(produceErrs, fmt.Errorf("record %d: %w", i, err))
				mu.Unlock()
				return
			}
			acks[i] = ack{r.Partition, r.Offset}
		})
	}
	wg.Wait()
	err = nil
	if len(produceErrs) > 0 {
		err = fmt.Errorf("%d produce errors, first: %v", len(produceErrs), produceErrs[0])
	} else {
		keyPart := map[string]int32{}
		for i := 0; i < n; i++ {
			if p, ok := keyPart[key(i)]; ok && p != acks[i].partition {
				err = fmt.Errorf("key %s acked on partitions %d and %d", key(i), p, acks[i].partition)
				break
			}
			keyPart[key(i)] = acks[i].partition
		}
	}
	if !suite.Check(fmt.Sprintf("producer(default: idempotent, acks=all) %d keyed records acknowledged", n), err,
		fmt.Sprintf("%.1fs", time.Since(start).Seconds())) {
		return
	}

	start = time.Now()
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(suite.Seeds(bootstrap)...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	if !suite.Check("kgo.NewClient(ConsumePartitions)", err, "") {
		return
	}
	defer cons.Close()
	type rec struct {
		partition int32
		offset    int64
		key, val  string
	}
	var got []rec
	deadline := time.Now().Add(120 * time.Second)
	extra := false
	for time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachError(func(t string, p int32, err error) {
			if err != context.DeadlineExceeded && err != context.Canceled {
				fmt.Printf("  [fetch error] %s[%d]: %v\n", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, rec{r.Partition, r.Offset, string(r.Key), string(r.Value)})
		})
		if len(got) >= n {
			if extra {
				break
			}
			extra = true // one more poll to catch duplicates
		}
	}
	err = func() error {
		if len(got) != n {
			return fmt.Errorf("read %d records, want %d", len(got), n)
		}
		sort.Slice(got, func(a, b int) bool {
			if got[a].partition != got[b].partition {
				return got[a].partition < got[b].partition
			}
			return got[a].offset < got[b].offset
		})
		seen := make([]bool, n)
		keyPart := map[string]int32{}
		next := map[int32]int64{}
		for _, r := range got {
			var i int
			if _, err := fmt.Sscanf(r.val, "value-%07d-", &i); err != nil || i < 0 || i >= n || r.val != value(i) {
				return fmt.Errorf("corrupt value %q at %d/%d", r.val, r.partition, r.offset)
			}
			if seen[i] {
				return fmt.Errorf("duplicate value %q", r.val)
			}
			seen[i] = true
			if r.key != key(i) {
				return fmt.Errorf("value %d has key %q want %q", i, r.key, key(i))
			}
			if p, ok := keyPart[r.key]; ok && p != r.partition {
				return fmt.Errorf("key %s on partitions %d and %d", r.key, p, r.partition)
			}
			keyPart[r.key] = r.partition
			if acks[i].partition != r.partition {
				return fmt.Errorf("value %d acked on partition %d, read from %d", i, acks[i].partition, r.partition)
			}
			if r.offset != next[r.partition] {
				return fmt.Errorf("partition %d: offset %d, want %d (not contiguous from 0)", r.partition, r.offset, next[r.partition])
			}
			next[r.partition]++
		}
		return nil
	}()
	suite.Check(fmt.Sprintf("consumer(ConsumePartitions, no group) reads back %d: count, values, per-key partition, contiguous offsets", n),
		err, fmt.Sprintf("%.1fs", time.Since(start).Seconds()))
}
