// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package bench holds the project's benchmarks. Each runs the work and, where
// one exists, its physical baseline in the same run and reports both with
// their ratio. Run them with `make bench`.
package bench
