package main

import _ "embed"

// exampleConfig is examples/vflag-sim.yaml, embedded so that the demo and
// `vflag example-config` need no file (a test keeps the two equal).
//
//go:embed example.yaml
var exampleConfig string
