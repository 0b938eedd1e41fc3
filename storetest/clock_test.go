package storetest_test

import (
	"fmt"
	"time"

	"github.com/spentledger/spent/storetest"
)

func ExampleClock() {
	clock := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	// Pass clock.Now as spent.Config.Now; then move time by hand.
	fmt.Println(clock.Now().Format(time.RFC3339Nano))
	fmt.Println(clock.Advance(30*time.Second + time.Nanosecond).Format(time.RFC3339Nano))
	clock.Set(time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC))
	fmt.Println(clock.Now().Format(time.RFC3339Nano))
	// Output:
	// 2030-01-01T00:00:00Z
	// 2030-01-01T00:00:30.000000001Z
	// 2030-01-02T00:00:00Z
}
