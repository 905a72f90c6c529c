// SPDX-License-Identifier: LGPL-2.1-or-later
// G_DEFINE_TYPE with a GType name of our choosing. GStreamer names an element instance after its
// GType ("GstFooBar" -> "foobar0"), and C identifiers cannot hold the '-' of "cudasink-ipc", so
// G_DEFINE_TYPE could only give "cudasinkipc0". GType names may contain '-': registering
// "GstCudaSink-ipc" makes the default instance name "cudasink-ipc0", like the element's.
// Defines type_name##_get_type() and type_name##_parent_class as G_DEFINE_TYPE does; the _WITH_CODE
// form runs CODE once the type exists, as G_DEFINE_TYPE_WITH_CODE does (G_IMPLEMENT_INTERFACE).
#pragma once

#include <glib-object.h>

#define CIPC_DEFINE_ELEMENT_TYPE_WITH_CODE(TypeName, type_name, PARENT_TYPE, gtype_name, CODE) \
  static void type_name##_init(TypeName* self);                                                \
  static void type_name##_class_init(TypeName##Class* klass);                                  \
  static gpointer type_name##_parent_class = nullptr;                                          \
  static void type_name##_class_intern_init(gpointer klass, gpointer) {                        \
    type_name##_parent_class = g_type_class_peek_parent(klass);                                \
    type_name##_class_init(static_cast<TypeName##Class*>(klass));                              \
  }                                                                                            \
  static void type_name##_intern_init(GTypeInstance* instance, gpointer) {                     \
    type_name##_init(reinterpret_cast<TypeName*>(instance));                                   \
  }                                                                                            \
  GType type_name##_get_type(void) {                                                           \
    static gsize type_id = 0;                                                                  \
    if (g_once_init_enter(&type_id)) {                                                         \
      const GType g_define_type_id = g_type_register_static_simple(                            \
          PARENT_TYPE, g_intern_static_string(gtype_name), sizeof(TypeName##Class),            \
          type_name##_class_intern_init, sizeof(TypeName), type_name##_intern_init,            \
          static_cast<GTypeFlags>(0));                                                         \
      CODE;                                                                                    \
      g_once_init_leave(&type_id, g_define_type_id);                                           \
    }                                                                                          \
    return type_id;                                                                            \
  }

#define CIPC_DEFINE_ELEMENT_TYPE(TypeName, type_name, PARENT_TYPE, gtype_name) \
  CIPC_DEFINE_ELEMENT_TYPE_WITH_CODE(TypeName, type_name, PARENT_TYPE, gtype_name, {})
