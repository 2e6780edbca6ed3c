// franz-go transactions: a transactional client (kgo.TransactionalID) commits N records and aborts M
// (EndTransaction TryCommit / TryAbort); consumers with FetchIsolationLevel(ReadCommitted) and
// ReadUncommitted see exactly the committed values resp. all of them; while a transaction is open the
// last stable offset (kadm ListCommittedOffsets) stays at its first offset and read_committed consumers
// wait, the commit releases them; after completion both end offsets agree.
// Prints PASS/FAIL per check and a final "N passed, N failed" line.
package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sluice/compat/go/internal/suite"
)

const partitions = 3

func values(tag string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", tag, i)
	}
	return out
}

// begin starts a transaction and produces values in it (left open); returns, per partition it touched,
// the first offset written.
func begin(ctx context.Context, cl *kgo.Client, topic string, vals []string) (map[int32]int64, error) {
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return nil, fmt.Errorf("BeginTransaction: %w", err)
	}
	first := map[int32]int64{}
	return first, produce(tctx, cl, topic, vals, first)
}

func produce(ctx context.Context, cl *kgo.Client, topic string, vals []string, first map[int32]int64) error {
	recs := make([]*kgo.Record, len(vals))
	for i, v := range vals {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i%13)), Value: []byte(v)}
	}
	for _, r := range cl.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			return fmt.Errorf("produce: %w", r.Err)
		}
		if o, ok := first[r.Record.Partition]; !ok || r.Record.Offset < o {
			first[r.Record.Partition] = r.Record.Offset
		}
	}
	return nil
}

func end(ctx context.Context, cl *kgo.Client, how kgo.TransactionEndTry) error {
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := cl.EndTransaction(tctx, how); err != nil {
		return fmt.Errorf("EndTransaction: %w", err)
	}
	return nil
}

func reader(bootstrap, topic string, committed bool) (*kgo.Client, error) {
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offs[p] = kgo.NewOffset().AtStart()
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	return kgo.NewClient(kgo.SeedBrokers(suite.Seeds(bootstrap)...), kgo.FetchIsolationLevel(iso),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
}

// poll reads until want values arrived (or maxWait passed), then one more second for extras.
func poll(ctx context.Context, cl *kgo.Client, want int, maxWait time.Duration) []string {
	var got []string
	deadline := time.Now().Add(maxWait)
	var quiet time.Time
	for {
		now := time.Now()
		if quiet.IsZero() && (len(got) >= want || now.After(deadline)) {
			quiet = now.Add(time.Second)
		}
		if !quiet.IsZero() && now.After(quiet) {
			return got
		}
		pctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
}

func readAll(ctx context.Context, bootstrap, topic string, committed bool, want int) ([]string, error) {
	cl, err := reader(bootstrap, topic, committed)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return poll(ctx, cl, want, 20*time.Second), nil
}

func same(got []string, want ...[]string) error {
	w := map[string]bool{}
	for _, vs := range want {
		for _, v := range vs {
			w[v] = true
		}
	}
	g := map[string]int{}
	for _, v := range got {
		g[v]++
	}
	var missing, extra, dups int
	for v := range w {
		if g[v] == 0 {
			missing++
		} else if g[v] > 1 {
			dups += g[v] - 1
		}
	}
	for v := range g {
		if !w[v] {
			extra++
		}
	}
	if missing+extra+dups > 0 || len(got) != len(w) {
		return fmt.Errorf("read %d records, want %d: %d missing, %d unexpected, %d duplicates", len(got), len(w), missing, extra, dups)
	}
	return nil
}

func offsets(ctx context.Context, adm *kadm.Client, topic string, committed bool) (map[int32]int64, error) {
	var lo kadm.ListedOffsets
	var err error
	if committed {
		lo, err = adm.ListCommittedOffsets(ctx, topic)
	} else {
		lo, err = adm.ListEndOffsets(ctx, topic)
	}
	if err != nil {
		return nil, err
	}
	if err := lo.Error(); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

func fmtOffsets(m map[int32]int64) string {
	ps := make([]int, 0, len(m))
	for p := range m {
		ps = append(ps, int(p))
	}
	sort.Ints(ps)
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf(" %d:%d", p, m[int32(p)])
	}
	return "{" + s[min(1, len(s)):] + "}"
}

func main() {
	bootstrap, prefix := suite.Start()
	topic := prefix + "-gotxn"
	t0 := time.Now()
	defer func() {
		fmt.Printf("seconds: %.1f\n", time.Since(t0).Seconds())
		suite.Finish()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(suite.Seeds(bootstrap)...), kgo.TransactionalID(prefix+"-gotxn"),
		kgo.TransactionTimeout(60*time.Second), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		// bounds the retries of FindCoordinator/InitProducerId (30 s by default): a broker without a
		// transaction coordinator fails the first check in ~12 s instead of ~30 s
		kgo.RetryTimeout(12*time.Second))
	if !suite.Check("txn/new-client", err, "") {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	_, err = func() (kadm.CreateTopicResponse, error) {
		return adm.CreateTopic(ctx, partitions, 1, nil, topic)
	}()
	if !suite.Check("txn/create-topic", err, "") {
		return
	}
	committed, aborted, open := values("commit", 200), values("abort", 100), values("open", 60)
	touched1, err := begin(ctx, cl, topic, committed)
	if err == nil {
		err = end(ctx, cl, kgo.TryCommit)
	}
	if !suite.Check("txn/commit", err, "200 records, EndTransaction(TryCommit)") {
		return // without a transaction coordinator every later check repeats this failure
	}
	touched2, err := begin(ctx, cl, topic, aborted)
	if err == nil {
		err = end(ctx, cl, kgo.TryAbort)
	}
	if !suite.Check("txn/abort", err, "100 records, EndTransaction(TryAbort)") {
		return
	}
	got, err := readAll(ctx, bootstrap, topic, true, 200)
	if err == nil {
		err = same(got, committed)
	}
	suite.Check("txn/read-committed", err, "exactly the 200 committed records")
	got, err = readAll(ctx, bootstrap, topic, false, 300)
	if err == nil {
		err = same(got, committed, aborted)
	}
	suite.Check("txn/read-uncommitted", err, "200 committed + 100 aborted")
	hw, err := offsets(ctx, adm, topic, false)
	var lso map[int32]int64
	if err == nil {
		lso, err = offsets(ctx, adm, topic, true)
	}
	if err == nil {
		sum := int64(0)
		for _, o := range hw {
			sum += o
		}
		if fmtOffsets(hw) != fmtOffsets(lso) {
			err = fmt.Errorf("end offsets %s != last stable offsets %s after both transactions", fmtOffsets(hw), fmtOffsets(lso))
		} else if markers := int64(len(touched1) + len(touched2)); sum != 300+markers {
			err = fmt.Errorf("end offsets %s sum to %d: want 300 records + %d markers (one per partition and transaction)", fmtOffsets(hw), sum, markers)
		}
	}
	suite.Check("txn/end-offsets", err, fmt.Sprintf("ListEndOffsets = ListCommittedOffsets = %s", fmtOffsets(hw)))

	// an open transaction holds read_committed readers at its first offset
	rc, err := reader(bootstrap, topic, true)
	if !suite.Check("txn/open-reader", err, "") {
		return
	}
	defer rc.Close()
	first, err := begin(ctx, cl, topic, open) // produced, not yet ended
	if !suite.Check("txn/open-produce", err, "60 records in an open transaction") {
		return
	}
	lso, err = offsets(ctx, adm, topic, true)
	if err == nil {
		for p, o := range first {
			if lso[p] != o {
				err = fmt.Errorf("partition %d: last stable offset %d, want the open transaction's first offset %d (all %s)", p, lso[p], o, fmtOffsets(lso))
			}
		}
	}
	suite.Check("txn/open-last-stable-offset", err, fmt.Sprintf("ListCommittedOffsets %s", fmtOffsets(lso)))
	got = poll(ctx, rc, 1<<30, 2*time.Second)
	suite.Check("txn/open-blocks-read-committed", same(got, committed), "only the 200 committed records in 3 s")
	got, err = readAll(ctx, bootstrap, topic, false, 360)
	if err == nil {
		err = same(got, committed, aborted, open)
	}
	suite.Check("txn/open-visible-read-uncommitted", err, "360 records including the open transaction")
	err = end(ctx, cl, kgo.TryCommit)
	if err == nil {
		err = same(poll(ctx, rc, len(open), 20*time.Second), open)
	}
	suite.Check("txn/commit-releases-read-committed", err, "the same read_committed consumer gets the 60 records")
}
