// Command weft is an LLM inference server: it serves Llama-family GGUF models
// over gRPC with continuous batching. Run `weft help` for the subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	goruntime "runtime"
	"sort"
	"syscall"

	"github.com/weft-inference/weft/runtime/kernels"
)

// command is one subcommand. Each lives in its own file and registers itself
// in init().
type command struct {
	name  string
	short string
	run   func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("weft: duplicate command " + c.name)
	}
	commands[c.name] = c
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: weft <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-12s %s\n", n, commands[n].short)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'weft <command> -h' for a command's flags.\n")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	if os.Args[1] == "--version" || os.Args[1] == "-version" {
		os.Args[1] = "version"
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "weft: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	setComputeThreads(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := c.run(ctx, os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// SIGINT/SIGTERM stopped a command between two steps (serve
			// drains and returns nil instead): say so, exit as a shell
			// does for an interrupted command.
			fmt.Fprintf(os.Stderr, "weft %s: interrupted\n", c.name)
			os.Exit(130)
		}
		fmt.Fprintf(os.Stderr, "weft %s: %v\n", c.name, err)
		os.Exit(1)
	}
}

// setComputeThreads gives the CPU backend threads compute threads
// (0: GOMAXPROCS as the Go runtime chose it, which follows CPU quotas) and
// the Go scheduler one P more. The matrix kernels run in cgo calls of
// milliseconds; with every P in such a call, Go's sysmon takes the Ps back
// after 20 us and starts a spinning thread to look for other work, a third
// busy thread on the cores doing the arithmetic, and the pool's worker
// changes OS threads every other job. With one idle P it does neither
// (BENCHMARKS.md §1, what bounds the CPU runtime, has the figures).
func setComputeThreads(threads int) {
	if threads <= 0 {
		threads = goruntime.GOMAXPROCS(0)
	}
	if kernels.SetWorkers(threads) {
		goruntime.GOMAXPROCS(threads + 1)
	}
}
