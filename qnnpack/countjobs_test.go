package qnnpack

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCountJobs(t *testing.T) {
	runs := []JobResult{
		{Ran: true, Duration: 2 * time.Second},
		{Cached: true},
		{Cached: true, Fetched: true},
		{Ran: true, Duration: 500 * time.Millisecond},
		{Cached: true},
	}
	assert.Equal(t, JobCounts{Ran: 2, UpToDate: 2, Fetched: 1, ToolTime: 2500 * time.Millisecond}, CountJobs(runs))
	assert.Equal(t, JobCounts{}, CountJobs(nil))
}
