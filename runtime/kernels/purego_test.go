//go:build purego

package kernels

const puregoBuild = true
