package sse_test

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/sse"
)

func ExampleReader() {
	stream := ": keep-alive\r\n\r\n" +
		"data: {\"choices\":[]}\r\n\r\n" +
		"event: error\ndata: {\"error\":\n data: {}}\n\n" +
		"data: [DONE]" // no final blank line: still returned
	r := sse.NewReader(strings.NewReader(stream))
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("type=%q data=%q comment=%q other=%q\n", ev.Type, ev.Data, ev.Comment, ev.Other)
	}
	// Output:
	// type="" data="" comment="keep-alive" other=""
	// type="" data="{\"choices\":[]}" comment="" other=""
	// type="error" data="{\"error\":" comment="" other=" data: {}}"
	// type="" data="[DONE]" comment="" other=""
}

func ExampleAppendEvent() {
	buf := sse.AppendEvent(nil, sse.Event{Comment: []byte("keep-alive")})
	buf = sse.AppendEvent(buf, sse.Event{Type: []byte("error"), Data: []byte("line 1\nline 2")})
	os.Stdout.Write(buf)
	// Output:
	// : keep-alive
	//
	// event: error
	// data: line 1
	// data: line 2
}
