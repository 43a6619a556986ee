// Package storetest is the conformance suite every store.Store runs: what
// the daemon relies on, checked the same way against store/local and
// store/jetstream. A store's tests call Run with a Harness.
package storetest
