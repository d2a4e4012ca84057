//go:build !purego

package runtime

const puregoBuild = false
