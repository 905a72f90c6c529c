// SPDX-License-Identifier: LGPL-2.1-or-later
#include "camera/v4l2caps.h"

#include "formats.h"

namespace cipc_gst {

namespace cb = cipc_bayer;
namespace v4l = cipc_v4l2;

gint clamp_int(uint32_t v) {
  return v > G_MAXINT ? G_MAXINT : static_cast<gint>(v);
}

namespace {

// One rate stays a fraction, not a one-item list: fixed caps fixate (and print) plainly.
void set_framerates(GstStructure* s, const v4l::FrameRates& rates) {
  GValue value = G_VALUE_INIT;
  switch (rates.kind) {
    case v4l::FrameRates::Kind::kDiscrete:
      if (rates.discrete.size() == 1) {
        gst_structure_set(s, "framerate", GST_TYPE_FRACTION, clamp_int(rates.discrete[0].num),
                          clamp_int(rates.discrete[0].den), nullptr);
        return;
      }
      g_value_init(&value, GST_TYPE_LIST);
      for (const v4l::Fraction& f : rates.discrete) {
        GValue item = G_VALUE_INIT;
        g_value_init(&item, GST_TYPE_FRACTION);
        gst_value_set_fraction(&item, clamp_int(f.num), clamp_int(f.den));
        gst_value_list_append_and_take_value(&value, &item);
      }
      break;
    case v4l::FrameRates::Kind::kRange:
      if (rates.min == rates.max) {
        gst_structure_set(s, "framerate", GST_TYPE_FRACTION, clamp_int(rates.min.num),
                          clamp_int(rates.min.den), nullptr);
        return;
      }
      g_value_init(&value, GST_TYPE_FRACTION_RANGE);
      gst_value_set_fraction_range_full(&value, clamp_int(rates.min.num), clamp_int(rates.min.den),
                                        clamp_int(rates.max.num), clamp_int(rates.max.den));
      break;
    case v4l::FrameRates::Kind::kUnknown:
      // The driver did not say: any rate, and fixation picks one.
      g_value_init(&value, GST_TYPE_FRACTION_RANGE);
      gst_value_set_fraction_range_full(&value, 0, 1, G_MAXINT, 1);
      break;
  }
  gst_structure_take_value(s, "framerate", &value);
}

void set_dimension(GstStructure* s, const char* field, uint32_t min, uint32_t max, uint32_t step) {
  if (min >= max) {
    gst_structure_set(s, field, G_TYPE_INT, clamp_int(min), nullptr);
    return;
  }
  GValue range = G_VALUE_INIT;
  g_value_init(&range, GST_TYPE_INT_RANGE);
  if (step > 1)
    gst_value_set_int_range_step(&range, clamp_int(min), clamp_int(max), clamp_int(step));
  else
    gst_value_set_int_range(&range, clamp_int(min), clamp_int(max));
  gst_structure_take_value(s, field, &range);
}

}  // namespace

GstCaps* caps_from_formats(const std::vector<v4l::FormatDescription>& formats,
                           uint32_t preferred_fourcc) {
  GstCaps* caps = gst_caps_new_empty();
  // Caps are ordered by preference: the current format's sizes first (pass 0), then the rest.
  for (int pass = 0; pass < 2; ++pass) {
    for (const v4l::FormatDescription& fd : formats) {
      const cb::BayerFormat* bayer = cb::bayer_format_from_fourcc(fd.fourcc);
      if (!bayer || (fd.fourcc == preferred_fourcc) != (pass == 0)) continue;
      for (const v4l::FrameSize& size : fd.sizes) {
        GstStructure* s =
            gst_structure_new("video/x-bayer", "format", G_TYPE_STRING, bayer->caps_name, nullptr);
        set_dimension(s, "width", size.min_width, size.max_width, size.step_width);
        set_dimension(s, "height", size.min_height, size.max_height, size.step_height);
        set_framerates(s, size.rates);
        gst_caps_append_structure(caps, s);
      }
    }
  }
  return caps;
}

int format_rank(const char* name, uint32_t preferred_fourcc) {
  const cb::BayerFormat* f = name ? cb::bayer_format_from_caps_name(name) : nullptr;
  if (!f) return 9;
  if (f->fourcc == preferred_fourcc) return 0;
  // 10-bit first: that is what rg10tobgra reads; then the deeper of the others.
  return f->bits == 10 ? 1 : f->bits == 12 ? 2 : 3;
}

}  // namespace cipc_gst
