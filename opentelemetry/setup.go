package opentelemetry

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// DefaultServiceName is the service.name of the traces when neither
// OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names one.
const DefaultServiceName = "spent"

// Enabled reports whether the OTEL_ variables getenv reads ask for traces:
// OTEL_TRACES_EXPORTER set to an exporter other than "none", or, with it
// unset, an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); never when OTEL_SDK_DISABLED is
// "true".
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e != "" {
		return e != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup returns the tracer provider the OTEL_ variables ask for, or nil
// when [Enabled] says tracing is off. getenv decides whether it is on; the
// exporter (OTLP over HTTP by default, gRPC with
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc, or "console"), its endpoint and
// headers, the sampler (OTEL_TRACES_SAMPLER) and the resource
// (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) are read from the process
// environment by the SDK itself, so pass os.Getenv outside tests. The
// caller calls the provider's Shutdown when it stops, to send the spans
// still buffered.
func Setup(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	if !Enabled(getenv) {
		return nil, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("opentelemetry: exporter (check OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_PROTOCOL): %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("opentelemetry: resource (check OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
