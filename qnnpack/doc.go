// Package qnnpack turns exported stages into something a phone runs: it
// finds the Qualcomm QAIRT/QNN SDK, plans and runs its tools per stage,
// writes the HTP and Genie configs and the bundle manifest, and models how
// fast the result will decode on a device.
package qnnpack
