package postgres

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/ctxcompact/ctxcompact/core"
	"github.com/ctxcompact/ctxcompact/internal/pgtest"
	"github.com/ctxcompact/ctxcompact/recall"
)

// The load: 16 processes (6 Go, 5 Node, 5 Python), 200 sessions, 2,000
// compactions' archives and 10,000 searches, all at once on one database.
const (
	loadSessions = 200
	loadArchives = 2000
	loadSearches = 10000
	loadWorkers  = 16
	// loadDeadline bounds the run: the processes are killed and the test fails past
	// it (a hang), far above what the load takes (docs/RECALL.md has the figures).
	loadDeadline = 10 * time.Minute
)

// loadWorkerEnv makes the test binary a Go load worker (TestMain).
const loadWorkerEnv = "CTXC_PG_LOAD_WORKER"

// loadVocab is the words of the rows and queries: every runtime's worker has it.
var loadVocab = []string{"alpha", "Bravo", "CHARLIE", "delta", "echo_1", "fox%trot", "golf", "hotel", "India", "juliet", "kilo", "lima", "Mike", "november", "oscar", "papa"}

// loadReport is a worker's one line of output.
type loadReport struct {
	Worker       int        `json:"worker"`
	Runtime      string     `json:"runtime"`
	Archived     [][]string `json:"archived"`
	Conflicts    int        `json:"conflicts"`
	Errors       []string   `json:"errors"`
	Searches     int        `json:"searches"`
	SearchErrors int        `json:"search_errors"`
}

// loadArchive is op i of a worker: the brief every runtime's worker follows
// (bindings/js/test/pg-load-worker.mjs, bindings/python/tests/pg_load_worker.py).
func loadArchive(worker, i int, id string) core.RecallArchive {
	tag := fmt.Sprintf("w%do%d", worker, i)
	a := core.RecallArchive{Range: core.RecallRange{ID: id, FromIndex: i, ToIndex: i + 3, Summary: "summary " + tag}}
	roles := []string{"user", "assistant", "tool"}
	for j, role := range roles {
		words := make([]string, 3)
		for k := range words {
			words[k] = loadVocab[(worker*31+i*17+j*7+k*3)%len(loadVocab)]
		}
		content := fmt.Sprintf("%s row%d %s", tag, j, strings.Join(words, " "))
		js := `{"role":` + strconv.Quote(role) + `,"content":` + strconv.Quote(content) + `}` // ASCII: Quote is JSON
		a.Rows = append(a.Rows, core.RecallRow{ID: fmt.Sprintf("%s.%d", id, j), RangeID: id, Position: i + j, Role: role, Reason: "summarized",
			JSON: js, Text: role + "\n" + content})
	}
	a.Rows = append(a.Rows, core.RecallRow{ID: id + ".summary", RangeID: id, Position: i + 3, Role: "user", Reason: "summary",
		JSON: `{"role":"user","content":"summary ` + tag + `"}`, Text: "user\nsummary " + tag})
	return a
}

// loadQuery is search n of a worker.
func loadQuery(worker, n int) (session, query string) {
	session = fmt.Sprintf("load-s%d", (worker*11+n*5)%loadSessions)
	query = loadVocab[(n*3)%len(loadVocab)]
	if n%3 == 0 {
		query += " " + strings.ToLower(loadVocab[(n*5+1)%len(loadVocab)])
	}
	return session, query
}

// runLoadWorker is a Go worker: URL WORKER OPS SEARCHES SESSIONS.
func runLoadWorker(spec string) int {
	f := strings.Fields(spec)
	url := f[0]
	worker, _ := strconv.Atoi(f[1])
	ops, _ := strconv.Atoi(f[2])
	searches, _ := strconv.Atoi(f[3])
	sessions, _ := strconv.Atoi(f[4])
	rep := loadReport{Worker: worker, Runtime: "go", Archived: [][]string{}, Errors: []string{}}
	ctx := context.Background()
	s, err := Open(ctx, url)
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	} else {
		defer s.Close()
		n := 0
		for i := 0; i < ops; i++ {
			session := fmt.Sprintf("load-s%d", (worker*7+i*13)%sessions)
			for {
				id, err := s.NextRangeID(ctx, session)
				if err == nil {
					err = s.ArchiveOne(ctx, session, loadArchive(worker, i, id))
				}
				var ce *core.Error
				if errors.As(err, &ce) && ce.Code == core.CodeInvalidState && ce.Path == "/range/id" {
					rep.Conflicts++
					continue
				}
				if err != nil {
					rep.Errors = append(rep.Errors, err.Error())
				} else {
					rep.Archived = append(rep.Archived, []string{session, id, fmt.Sprintf("w%do%d", worker, i)})
				}
				break
			}
			for k := searches * i / ops; k < searches*(i+1)/ops; k++ {
				session, q := loadQuery(worker, n)
				n++
				rep.Searches++
				hits, _, err := s.Find(ctx, session, q, 10)
				if err != nil || len(hits) > 10 {
					rep.SearchErrors++
					continue
				}
				for _, h := range hits {
					for _, term := range strings.Fields(q) {
						if !strings.Contains(strings.ToLower(h.Text), strings.ToLower(term)) {
							rep.SearchErrors++
						}
					}
				}
			}
		}
	}
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
	return 0
}

func TestSixteenProcessesOfThreeRuntimesOnOneDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("the load test (16 processes) is not -short")
	}
	rt := needRuntimes(t)
	url := pgtest.Database(t)
	ops, searches := loadArchives/loadWorkers, loadSearches/loadWorkers
	ctx, cancel := context.WithTimeout(context.Background(), loadDeadline)
	defer cancel()
	args := func(w int) []string {
		return []string{url, strconv.Itoa(w), strconv.Itoa(ops), strconv.Itoa(searches), strconv.Itoa(loadSessions)}
	}
	var cmds []*osexec.Cmd
	for w := 0; w < loadWorkers; w++ {
		var cmd *osexec.Cmd
		switch {
		case w < 6:
			cmd = osexec.CommandContext(ctx, os.Args[0], "-test.run", "^$")
			cmd.Env = append(os.Environ(), loadWorkerEnv+"="+strings.Join(args(w), " "))
		case w < 11:
			cmd = osexec.CommandContext(ctx, rt.node, append([]string{filepath.Join(rt.root, "bindings/js/test/pg-load-worker.mjs")}, args(w)...)...)
		default:
			cmd = osexec.CommandContext(ctx, rt.python, append([]string{filepath.Join(rt.root, "bindings/python/tests/pg_load_worker.py")}, args(w)...)...)
			cmd.Env = rt.pythonEnv
		}
		cmds = append(cmds, cmd)
	}
	start := time.Now()
	reports := make([]loadReport, loadWorkers)
	outs := make([]string, loadWorkers)
	var wg sync.WaitGroup
	for w, cmd := range cmds {
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		require.NoError(t, cmd.Start())
		wg.Go(func() {
			err := cmd.Wait()
			outs[w] = fmt.Sprintf("worker %d (%v): %s%s", w, err, out.String(), errb.String())
			line := ""
			for sc := bufio.NewScanner(&out); sc.Scan(); {
				line = sc.Text()
			}
			json.Unmarshal([]byte(line), &reports[w])
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	require.NoError(t, ctx.Err(), "the load did not end within %v", loadDeadline)

	// Every worker reported, without errors, its share of archives and searches.
	type key struct{ session, id string }
	acked := map[key]string{}
	tags := map[string]bool{}
	conflicts, nSearches := 0, 0
	byRuntime := map[string]int{}
	for w, r := range reports {
		require.Equal(t, w, r.Worker, outs[w])
		require.Empty(t, r.Errors, outs[w])
		require.Zero(t, r.SearchErrors, outs[w])
		require.Len(t, r.Archived, ops, outs[w])
		require.Equal(t, searches, r.Searches, outs[w])
		byRuntime[r.Runtime]++
		for _, a := range r.Archived {
			k := key{a[0], a[1]}
			_, dup := acked[k]
			require.False(t, dup, "range %s of %s acknowledged twice", a[1], a[0])
			acked[k] = a[2]
			tags[a[2]] = true
		}
		conflicts += r.Conflicts
		nSearches += r.Searches
	}
	require.Equal(t, map[string]int{"go": 6, "node": 5, "python": 5}, byRuntime)
	require.Len(t, acked, loadArchives)
	require.Equal(t, loadSearches, nSearches)

	// The database holds exactly what was acknowledged: each session's ranges
	// r1..rk, each range its four rows, no row of anything else.
	s, err := Open(context.Background(), url)
	require.NoError(t, err)
	defer s.Close()
	bg := context.Background()
	sessions, err := s.Sessions(bg)
	require.NoError(t, err)
	ranges, rows := 0, 0
	for _, session := range sessions {
		rs, err := s.Ranges(bg, session)
		require.NoError(t, err)
		for k, r := range rs {
			require.Equal(t, "r"+strconv.Itoa(k+1), r.ID, "session %s", session)
			require.Equal(t, k+1, r.Seq)
			tag, ok := acked[key{session, r.ID}]
			require.True(t, ok, "range %s of %s was not acknowledged by any worker", r.ID, session)
			require.Equal(t, "summary "+tag, r.Summary)
			rws, err := s.RangeRows(bg, session, r.ID)
			require.NoError(t, err)
			require.Len(t, rws, 4)
			for _, row := range rws {
				words := strings.Fields(gjson.Get(row.JSON, "content").Str) // "<tag> row<j> ...", "summary <tag>"
				require.Equal(t, tag, words[boolInt(row.Reason == "summary")], "row %s of %s", row.ID, session)
			}
			ranges++
			rows += len(rws)
		}
	}
	require.Equal(t, loadArchives, ranges, "0 lost, 0 duplicated ranges")
	require.Equal(t, 4*loadArchives, rows)
	var total int
	require.NoError(t, s.pool.QueryRow(bg, `SELECT count(*) FROM ctxc_messages`).Scan(&total))
	require.Equal(t, 4*loadArchives, total, "no row of a refused or failed archive")

	// Every search equals the SQLite store's on the same rows (exported, imported).
	var exported bytes.Buffer
	_, _, err = recall.Export(bg, s, &exported)
	require.NoError(t, err)
	lite, err := recall.Open(filepath.Join(t.TempDir(), "load.db"))
	require.NoError(t, err)
	defer lite.Close()
	_, err = recall.Import(bg, lite, &exported)
	require.NoError(t, err)
	// Each of the load's 10,000 searches again, now that the rows stand still (and
	// every 7th without a limit: every match, an exact total).
	compared := 0
	for w := 0; w < loadWorkers; w++ {
		for n := 0; n < searches; n++ {
			session, q := loadQuery(w, n)
			limits := []int{10}
			if n%7 == 0 {
				limits = append(limits, 0)
			}
			for _, limit := range limits {
				ph, pt, err := s.Find(bg, session, q, limit)
				require.NoError(t, err)
				lh, lt, err := lite.Find(bg, session, q, limit)
				require.NoError(t, err)
				require.Equal(t, lt, pt, "total of %q in %s, limit %d", q, session, limit)
				require.Equal(t, lh, ph, "hits of %q in %s, limit %d", q, session, limit)
				compared++
			}
		}
	}
	t.Logf("16 processes (6 Go, 5 Node, 5 Python): %d archives (%d range-id conflicts retried), %d searches in %.1f s; "+
		"%d sessions, %d ranges, %d rows; %d searches equal to the SQLite store's",
		loadArchives, conflicts, nSearches, elapsed.Seconds(), len(sessions), ranges, rows, compared)
	require.True(t, slices.IsSorted(sessions))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
