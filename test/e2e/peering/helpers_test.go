// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering_test

import "fmt"

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
